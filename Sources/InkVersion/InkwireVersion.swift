/// The version of this build of Inkwire: one number for `inkwired --version`, `inkwire
/// --version`, the daemon's ready line, `inkwire_build_info` and the Debian package. It comes
/// from the VERSION file at the package root; the commit from git (both stamped by the
/// VersionStamp build plugin into `BuildStamp`).
public enum InkwireVersion {
    /// `0.2.0`.
    public static let string = BuildStamp.version
    /// The git commit built, 12 hex digits, or `unknown` (a source tree without git).
    public static let commit = BuildStamp.commit
}
