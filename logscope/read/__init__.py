"""Read: paths, globs, directories and stdin, decompressed, as blocks of whole lines."""
