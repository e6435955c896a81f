import InkImage
import LegacyAppModel

extension HYUploadManager {
    /// What the app's ImageIO gives for an uploaded buffer, for the formats a room holds (JPEG,
    /// PNG): the decoded size, or nil when it does not decode.
    public static func imageIO(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        guard case .success(let info) = ImageCheck.check(bytes) else { return nil }
        return (Int(info.width), Int(info.height))
    }
}
