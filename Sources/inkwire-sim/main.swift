print("inkwire-sim: not yet implemented")
