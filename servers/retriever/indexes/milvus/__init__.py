"""Milvus, Lite or server, as an index backend: the client and its errors (client.py), one
collection as a document store (store.py) with its info record (info.py), document frequencies
(df.py), full text (fulltext.py, terms.py) and learned-sparse vectors (sparse.py); filters in
Milvus's expression language (filters.py); a collection's dense index (index.py) and the backend
a session opens (backend.py). pymilvus is imported only when a Milvus is reached."""
