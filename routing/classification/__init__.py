"""Classification: what a question asks for (its intent) and how broad it is (its query type).

Rules an admin edits, conversation context, models learned from examples and an
optional LLM, tried as a cascade; the defaults Flywheel ships with.
"""
