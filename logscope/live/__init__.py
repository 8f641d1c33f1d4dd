"""Live: following growing logs, raising crashes and hangs as alerts, and acting on them."""
