import Testing
@testable import InkStore

@Test func InkStoreModuleLinks() {
    #expect(Bool(true))
}
