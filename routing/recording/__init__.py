"""Recording: what each query did, kept durably.

The decision record, the local spool it is written to before the answer goes
out, the writer that moves it into the store in batches, and what is read back
(performance aggregates, cached answers).
"""
