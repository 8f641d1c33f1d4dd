"""Match: the signature library, the literal prefilter that finds candidate lines, and the
events that matched lines become."""
