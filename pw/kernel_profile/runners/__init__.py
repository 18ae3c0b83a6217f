"""Runners: one function per (table, backend), called by the worker as `runner(ctx, **args)`.

Imported only inside a worker process, so the parent never imports torch.
"""
