// The Swift samples of the Events article (XTalkBleSdk.docc), verbatim:
// DocumentationSnippetTests checks that every sample is here. The SwiftUI
// sample compiles on Apple platforms and in the Apple stand-in build
// (XTALK_APPLE_STANDINS=1, against StandIns/SwiftUI).
import Foundation
import XTalkBleSdk

#if canImport(SwiftUI)
    import SwiftUI

    struct RadioFramesView: View {
        let ble: XTalkBleClient
        @State private var frames: [Data] = []

        var body: some View {
            List(frames.indices, id: \.self) { index in
                Text("\(frames[index].count) bytes")
            }
            .task {
                for await event in ble.events {
                    if case .diPayload(let payload, _) = event { frames.append(payload) }
                }
            }
        }
    }
#endif

@MainActor
func logEveryEvent(of ble: XTalkBleClient) {
    ble.onEvent = { event in
        print("xTalk event: \(event)")
    }
}

@MainActor
final class LineLogger {
    private let ble: XTalkBleClient
    private var token: UUID?

    init(ble: XTalkBleClient) {
        self.ble = ble
    }

    func start() {
        token = ble.observeAtLines { line in print("AT: \(line)") }
    }

    func stop() {
        if let token { ble.removeAtLineObserver(token) }
        token = nil
    }
}
