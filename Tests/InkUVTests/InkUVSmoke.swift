import Testing
@testable import InkUV

@Test func InkUVModuleLinks() {
    #expect(Bool(true))
}
