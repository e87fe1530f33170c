"""What lives on disk: the corpus, collections and their change log, the catalog of collections,
the embedding file, manifests, crash-safe persistence and the writer's lock."""
