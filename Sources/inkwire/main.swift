print("inkwire: not yet implemented")
