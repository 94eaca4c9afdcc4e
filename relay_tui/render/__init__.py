"""Pure text building: views in, Rich Text out (styles, spend, the header, facts, graphs)."""
