import CENet
print("inkwire-bench: not yet implemented")
