import Testing
@testable import InkRelay

@Test func InkRelayModuleLinks() {
    #expect(Bool(true))
}
