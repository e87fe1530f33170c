"""LLM-assisted retrieval: a chat-completions client (client.py), prompt templates (prompts.py), the
tasks (tasks.py: rewrite, judge, rerank, triples, filters) and the triple graph (graph.py)."""
