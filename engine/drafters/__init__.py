"""Drafters behind one small interface (see base.py): one module per method."""
