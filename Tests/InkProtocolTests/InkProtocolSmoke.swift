import Testing
@testable import InkProtocol

@Test func InkProtocolModuleLinks() {
    #expect(Bool(true))
}
