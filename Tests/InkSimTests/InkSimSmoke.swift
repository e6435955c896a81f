import Testing
@testable import InkSim

@Test func InkSimModuleLinks() {
    #expect(Bool(true))
}
