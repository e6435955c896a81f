import CLibUV

/// Runs an action at one fixed point of every loop iteration: `.beforeWait` (uv_prepare: just
/// before the loop blocks for IO) or `.afterIO` (uv_check: right after the iteration's IO
/// callbacks). It does not keep the loop alive on its own (the handle is unreferenced).
final class LoopPhaseHook: HandleOwner {
    enum Phase {
        case beforeWait
        case afterIO
    }

    private var handle: UnsafeMutablePointer<uv_handle_t>?
    private var action: (() -> Void)?
    private(set) var isClosing = false

    init(loop: UnsafeMutablePointer<uv_loop_t>, phase: Phase, _ action: @escaping () -> Void) throws(UVError) {
        let handle: UnsafeMutablePointer<uv_handle_t>
        switch phase {
        case .beforeWait:
            let prepare = UnsafeMutablePointer<uv_prepare_t>.allocate(capacity: 1)
            let rc = uv_prepare_init(loop, prepare)
            if rc < 0 {
                discardUninitialised(prepare)
                throw UVError(code: rc, operation: "prepare_init")
            }
            handle = asHandle(prepare)
            attach(self, to: handle)
            uv_prepare_start(prepare, hookPrepared)
        case .afterIO:
            let check = UnsafeMutablePointer<uv_check_t>.allocate(capacity: 1)
            let rc = uv_check_init(loop, check)
            if rc < 0 {
                discardUninitialised(check)
                throw UVError(code: rc, operation: "check_init")
            }
            handle = asHandle(check)
            attach(self, to: handle)
            uv_check_start(check, hookChecked)
        }
        uv_unref(handle)
        self.handle = handle
        self.action = action
    }

    func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        closeHandle(handle)
    }

    func didClose() {
        handle = nil
        action = nil
    }

    fileprivate func fire() {
        guard !isClosing, let action else { return }
        action()
    }
}

private func hookPrepared(_ handle: UnsafeMutablePointer<uv_prepare_t>?) {
    guard let handle, let hook = owner(asHandle(handle), as: LoopPhaseHook.self) else { return }
    hook.fire()
}

private func hookChecked(_ handle: UnsafeMutablePointer<uv_check_t>?) {
    guard let handle, let hook = owner(asHandle(handle), as: LoopPhaseHook.self) else { return }
    hook.fire()
}
