print("inkwired: not yet implemented")
