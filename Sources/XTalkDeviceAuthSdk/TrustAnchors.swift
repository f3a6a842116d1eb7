import Foundation

/// The trust anchors an app declares once, for every authentication whose
/// configuration names none (`XTalkDeviceAuthConfiguration.trustAnchors == nil`,
/// the default).
///
/// The rule, in one place: an authentication trusts the first of these that is set
/// 1. the configuration's `trustAnchors`;
/// 2. `XTalkTrustAnchors.declared`, set in code (platforms without an
///    Info.plist, tests);
/// 3. the app's Info.plist entry `XTalkTrustAnchors`: an array of Ed25519
///    public keys, each 32 bytes as base64 or as 64 hex digits (the string
///    `development` names the development anchor);
/// 4. none declared: the development anchor, whose private key ships in the
///    simulator's source. The result says so (`verifiedBy == .development`)
///    and the authenticator logs a warning once. Declare your production
///    anchors before you ship.
///
/// When anchors are declared, the development anchor is trusted only if it is
/// listed. A declared entry that is not a valid key, or an empty list, fails
/// authentication with `.invalidConfiguration` before any command is sent
/// (the log's warning names the list and the entry that is wrong).
public enum XTalkTrustAnchors {
    /// The Info.plist key: an array of strings.
    public static let infoPlistKey = "XTalkTrustAnchors"

    /// Anchors declared in code; takes precedence over the Info.plist entry.
    @MainActor public static var declared: [XTalkTrustAnchor]?

    /// The anchors an Info.plist value declares: nil when the entry is absent.
    /// Throws `.invalidConfiguration` for anything but an array of valid keys.
    public static func parse(infoPlistValue value: Any?) throws(XTalkDeviceAuthError) -> [XTalkTrustAnchor]? {
        guard let value else { return nil }
        guard let entries = value as? [Any] else { throw .invalidConfiguration }
        var anchors: [XTalkTrustAnchor] = []
        for entry in entries {
            guard let text = entry as? String, let anchor = XTalkTrustAnchor(declaration: text) else {
                throw .invalidConfiguration
            }
            anchors.append(anchor)
        }
        return anchors
    }

    /// Where the anchors of an authentication come from.
    package enum Source: Equatable {
        case configuration
        case code
        case infoPlist
        /// Nothing declared: the development anchor.
        case developmentDefault
    }

    /// The anchors to trust for `configuration`, and where they came from.
    @MainActor
    package static func resolve(_ configuration: XTalkDeviceAuthConfiguration, bundle: Bundle = .main)
        throws(XTalkDeviceAuthError) -> (anchors: [XTalkTrustAnchor], source: Source)
    {
        let resolved: ([XTalkTrustAnchor], Source)
        if let explicit = configuration.trustAnchors {
            resolved = (explicit, .configuration)
        } else if let declared {
            resolved = (declared, .code)
        } else if let listed = try parse(infoPlistValue: bundle.object(forInfoDictionaryKey: infoPlistKey)) {
            resolved = (listed, .infoPlist)
        } else {
            resolved = ([.development], .developmentDefault)
        }
        guard !resolved.0.isEmpty else { throw .invalidConfiguration }
        return resolved
    }
}

extension XTalkTrustAnchors {
    /// What is wrong with the anchors an app declared (in code or in its
    /// Info.plist) when `resolve` rejects them, in words for the log: which
    /// list, and which entry. Nil when the declared anchors are valid or
    /// the configuration names its own.
    @MainActor
    package static func declarationProblem(_ configuration: XTalkDeviceAuthConfiguration, bundle: Bundle = .main)
        -> String?
    {
        guard configuration.trustAnchors == nil else { return nil }
        if let declared { return declared.isEmpty ? "XTalkTrustAnchors.declared is an empty list" : nil }
        let list = "Info.plist \(infoPlistKey)"
        guard let value = bundle.object(forInfoDictionaryKey: infoPlistKey) else { return nil }
        guard let entries = value as? [Any] else { return "\(list) is not an array of strings" }
        guard !entries.isEmpty else { return "\(list) is an empty list" }
        for (index, entry) in entries.enumerated() {
            guard let text = entry as? String else { return "\(list) item \(index) is not a string" }
            if XTalkTrustAnchor(declaration: text) == nil {
                let shown = text.count > 24 ? text.prefix(24) + "…" : Substring(text)
                return "\(list) item \(index) (\"\(shown)\") is not an Ed25519 public key"
            }
        }
        return nil
    }
}

extension XTalkTrustAnchor {
    /// A key as an app declares it: base64 or 64 hex digits of 32 bytes, or
    /// `development`. Nil for anything else.
    public init?(declaration text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "development" {
            self = .development
            return
        }
        if trimmed.utf8.count == 64, let bytes = Hex.decode(Array(trimmed.utf8)) {
            self.init(rawRepresentation: Data(bytes))
            return
        }
        guard let data = Data(base64Encoded: trimmed) else { return nil }
        self.init(rawRepresentation: data)
    }
}
