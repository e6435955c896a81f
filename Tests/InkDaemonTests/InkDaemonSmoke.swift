import Testing
@testable import InkDaemon

@Test func InkDaemonModuleLinks() {
    #expect(Bool(true))
}
