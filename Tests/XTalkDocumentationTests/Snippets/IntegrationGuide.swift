// The Swift samples of the integration guide (XTalkDeviceAuthSdk.docc): the
// customer's end-to-end session (seed 002) as written there. The adapter and
// the session are Seed002Session.swift (a link to the file the seed's own
// tests compile); the SwiftUI caller is here, for Apple platforms and the
// Apple stand-in build (XTALK_APPLE_STANDINS=1, against StandIns/SwiftUI).
#if canImport(SwiftUI)
    import SwiftUI

    struct DeviceView: View {
        @StateObject private var session = XTalkSdkSession()

        var body: some View {
            List(session.ble.scanResults) { device in
                Button("\(device.displayName)  \(device.rssi) dBm") {
                    session.connect(device)
                }
            }
            .toolbar {
                Button("Scan") { session.startScan() }
                Button("Authenticate") { session.authenticateConnectedDevice() }
            }
            .onDisappear { session.close() }
        }
    }
#endif
