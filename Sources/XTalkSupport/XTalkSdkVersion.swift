/// The version of the xTalk Swift SDK, the same for every product of the
/// package (importing `XTalkBleSdk` or `XTalkDeviceAuthSdk` makes it visible).
///
/// The SDK follows semantic versioning: the public API of the customer's API
/// reference (version 1.0.0) is the 1.0 contract. A minor version only adds
/// (new types, methods, options, never a new case in an existing public
/// enum); a patch version only fixes; anything that removes or changes public
/// API needs a new major version. CI checks every change against the
/// committed 1.0 API baseline (`api/`).
public enum XTalkSdkVersion {
    /// The version, as `major.minor.patch`: `"1.0.0"`.
    public static let string = "\(major).\(minor).\(patch)"
    /// Incremented for changes that remove or change public API.
    public static let major = 1
    /// Incremented for additions to the public API.
    public static let minor = 0
    /// Incremented for fixes that change no public API.
    public static let patch = 0
}
