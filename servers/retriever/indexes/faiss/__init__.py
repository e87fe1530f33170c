"""FAISS on local disk as an index backend: the index (index.py) and the backend a session opens
(backend.py). faiss itself is imported only when an index is built or loaded."""
