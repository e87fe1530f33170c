"""A user's folders as documents: walk a source (walk.py), parse each file by its format
(formats.py), cut it into chunks that carry their citation (records.py). The engine's sync
(engine/sync.py) compares what this finds with what the collection holds."""
