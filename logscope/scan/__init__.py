"""Scan: one range of an input, its candidate lines matched and its progress lines parsed in
bulk, as a result that crosses processes."""
