// InkCodec module. See docs/architecture.md for its place among the layers.
