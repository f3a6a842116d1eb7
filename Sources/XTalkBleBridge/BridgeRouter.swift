import Foundation

/// One JSON request in, one JSON reply out, for every host (the WebKit
/// handler, `xtalk bridge --stdio`):
///
///     {"id": <number>, "method": "<name>", "params": {"uuid": …, "data": "<hex>", "options": {"withoutResponse": …}}}
///     {"id": <same>, "result": <value or null>}
///     {"id": <same>, "error": {"code": <HardwareErrorCode>, "message": "…"}}
///
/// Requests run concurrently (a parked `receive` does not hold up a `send`);
/// each is answered exactly once, with its own id. A request that is not
/// JSON, has no numeric id, is longer than 1 MiB, or names no known method
/// is answered at once with code 900 (its id, or null when it has none). Of
/// a request longer than 1 MiB a host may keep only the head (see
/// `StandardInputLines`): its id is then read from the head. Payload hex is never
/// logged or echoed in errors.
@MainActor
package final class BridgeRouter {
    package typealias Reply = @MainActor (String) -> Void
    package typealias Handler = @MainActor (BridgeJSON, @escaping BleBridge.Completion) -> Void

    package let bridge: BleBridge
    /// Methods a host adds (the simulator's `simulator.linkLoss`, `simulator.notify`): params in, one answer.
    package var extraMethods: [String: Handler] = [:]

    /// The longest request taken, in bytes: far above any that OneKey's SDK
    /// makes (its largest, a piece of a V2 frame, is some kilobytes of hex).
    nonisolated package static let maximumRequestLength = 1 << 20

    package init(bridge: BleBridge) {
        self.bridge = bridge
    }

    /// Handles one request (a JSON object); `reply` runs once with the reply line (no newline).
    package func handle(_ request: some Collection<UInt8>, reply: @escaping Reply) {
        handle(Array(request), reply: reply)
    }

    package func handle(_ request: [UInt8], reply: @escaping Reply) {
        // (Parsed first, in linear time, so that even a request refused for its
        // length is answered with its own id: hosts match replies by id.)
        let object: BridgeJSON
        do {
            object = try BridgeJSON.parse(request)
        } catch {
            guard request.count > Self.maximumRequestLength else {
                return reply(Self.encode(id: nil, .failure(Self.badRequest("the request is not JSON: \(error)"))))
            }
            // Only its head: a host that reads lines keeps no more of a longer one.
            let id = BridgeJSON.leadingID(request).map { BridgeJSON.number($0).encoded }
            return reply(Self.encode(id: id, .failure(Self.tooLong(request.count))))
        }
        guard case .number(let number)? = object["id"] else {
            return reply(Self.encode(id: nil, .failure(Self.badRequest("the request has no numeric id"))))
        }
        let id = BridgeJSON.number(number).encoded  // the id as given (integers without a fraction)
        let finish: BleBridge.Completion = { result in reply(Self.encode(id: id, result)) }
        guard request.count <= Self.maximumRequestLength else { return finish(.failure(Self.tooLong(request.count))) }
        guard let method = object["method"]?.string else {
            return finish(.failure(Self.badRequest("the request has no method")))
        }
        let params = object["params"] ?? .object(BridgeJSONObject())
        let uuid = params["uuid"]?.string ?? ""
        switch method {
        case "init":
            bridge.initialize()
            finish(.success(.null))
        case "version":
            finish(.success(.string(BleBridge.version)))
        case "enumerate":
            bridge.enumerate(finish)
        case "connect":
            bridge.connect(uuid: uuid, finish)
        case "disconnect":
            bridge.disconnect(uuid: uuid, finish)
        case "send":
            guard let hex = params["data"]?.string else {
                return finish(.failure(BridgeError(.writeCharacteristic, "send needs data (a hex string)")))
            }
            var withoutResponse: Bool?
            switch params["options"]?["withoutResponse"] {
            case nil, .null?: break
            case .bool(let flag)?: withoutResponse = flag
            default:
                return finish(.failure(BridgeError(.writeCharacteristic, "options.withoutResponse must be a boolean")))
            }
            bridge.send(uuid: uuid, hex: hex, withoutResponse: withoutResponse, finish)
        case "receive":
            bridge.receive(uuid: uuid, finish)
        case "getProtocolV2PacketCapacity":
            finish(.success(bridge.protocolV2PacketCapacity(uuid: uuid).map(BridgeValue.number) ?? .null))
        default:
            guard let handler = extraMethods[method] else {
                return finish(.failure(Self.badRequest("there is no method \"\(method)\"")))
            }
            handler(params, finish)
        }
    }

    /// The reply line for request `id` (nil: the request had none).
    package static func encode(id: String?, _ result: Result<BridgeValue, BridgeError>) -> String {
        var line = ""
        if case .success(.string(let text)) = result {
            line.reserveCapacity(text.utf8.count + 48)  // one allocation for a chunk's reply
        } else {
            line.reserveCapacity(64)
        }
        line += "{\"id\":"
        line += id ?? "null"
        switch result {
        case .success(let value):
            line += ",\"result\":"
            if case .string(let text) = value {
                BridgeJSON.appendQuoted(text, to: &line)
            } else {
                line += json(value)
            }
            line += "}"
        case .failure(let error):
            line += ",\"error\":{\"code\":"
            line += String(error.code.rawValue)
            line += ",\"message\":"
            line += BridgeJSON.quoted(error.message)
            line += "}}"
        }
        return line
    }

    private static func json(_ value: BridgeValue) -> String {
        switch value {
        case .null: "null"
        case .number(let number): String(number)
        case .string(let text): BridgeJSON.quoted(text)
        case .devices(let devices):
            "["
                + devices.map {
                    "{\"id\":\(BridgeJSON.quoted($0.id)),\"name\":\(BridgeJSON.quoted($0.name)),\"commType\":\"ble\"}"
                }
                .joined(separator: ",") + "]"
        }
    }

    /// A request over `maximumRequestLength`: `length` is what the host kept of it.
    private static func tooLong(_ length: Int) -> BridgeError {
        badRequest("the request is more than 1 MiB long (\(length) bytes read)")
    }

    private static func badRequest(_ reason: String) -> BridgeError {
        BridgeError(.lowlevelTransportConnect, "bad request: \(reason)")
    }
}
