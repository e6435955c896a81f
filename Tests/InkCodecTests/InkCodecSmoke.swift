import Testing
@testable import InkCodec

@Test func InkCodecModuleLinks() {
    #expect(Bool(true))
}
