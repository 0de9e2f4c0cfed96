"""One module per tab, each with render()."""
