#!/usr/bin/env python3
"""bleak (the Python BLE library, BlueZ over D-Bus on Linux) against the project's fake BlueZ.

A real BlueZ client checks that the fake (`xtalk fake-bluez`) behaves as BlueZ does: if bleak, which is
written and tested against real bluetoothd, can scan, connect, resolve services, subscribe, write, receive
notifications and see a link loss through the fake, the fake's objects, properties, signals and their order
are close enough to BlueZ's for a real client.

    Tests/BlueZFidelity/setup-venv                        # once: bleak + dbus-fast, pinned
    .build/debug/xtalk fake-bluez --firmware-encoding plain &   # first line: DBUS_SYSTEM_BUS_ADDRESS=...
    DBUS_SYSTEM_BUS_ADDRESS=... .build/bleak-venv/bin/python Tests/BlueZFidelity/bleak_check.py [check]
    DBUS_SYSTEM_BUS_ADDRESS=... .build/bleak-venv/bin/python Tests/BlueZFidelity/bleak_check.py ping 20

`check` (the default) prints one `PASS name` / `FAIL name: why` line per check and exits 1 if any failed
(2 on a usage error). `ping N` connects as `check` does and prints one JSON line,
{"round_trips_ms": [...]}: N round trips of `AT+PING=<i>` written without response, each until its `OK`.
Only bleak's public API (BleakScanner, BleakClient) talks to "BlueZ"; the fake's control interface
(com.xtalk.FakeBlueZ1) is called with dbus-fast on the same bus. Every wait is bounded.
"""

import asyncio
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Optional, TypeVar

from bleak import BleakClient, BleakScanner
from bleak.backends.characteristic import BleakGATTCharacteristic
from bleak.backends.device import BLEDevice
from bleak.backends.scanner import AdvertisementData
from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus

SERVICE = "6e58a100-3c1f-4b7d-9f3a-5854414c4b00"
TX = "6e58a101-3c1f-4b7d-9f3a-5854414c4b00"
RX = "6e58a102-3c1f-4b7d-9f3a-5854414c4b00"
CCCD = "00002902-0000-1000-8000-00805f9b34fb"
NAME = "xTalk-0001"
ADDRESS = "C0:FF:EE:00:00:01"
MANUFACTURER = {0xFFFF: bytes.fromhex("01C0FFEE000001")}
MTU = 247  # the simulated link's ATT MTU (xtalk fake-bluez's default)

# Unsolicited lines the radio firmware may send at any time (received frames, CRC errors): not part of a reply.
UNSOLICITED = (b"+DI:", b"+CRCERR:")

SCAN_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
REPLY_TIMEOUT = 5.0
DISCONNECT_TIMEOUT = 5.0
WHOLE_RUN_TIMEOUT = 90.0

T = TypeVar("T")


class CheckFailed(Exception):
    pass


def expect(condition: bool, why: str) -> None:
    if not condition:
        raise CheckFailed(why)


async def bounded(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError:
        raise CheckFailed(f"{what}: nothing within {seconds:g} s") from None


class Lines:
    """The RX notifications, reassembled into CRLF-terminated lines; unsolicited URC lines are set aside."""

    def __init__(self) -> None:
        self.buffer = b""
        self.lines: list[bytes] = []
        self.unsolicited: list[bytes] = []
        self.changed = asyncio.Event()

    def on_notification(self, _: BleakGATTCharacteristic, data: bytearray) -> None:
        self.buffer += bytes(data)
        while (end := self.buffer.find(b"\r\n")) >= 0:
            line, self.buffer = self.buffer[: end + 2], self.buffer[end + 2 :]
            (self.unsolicited if line.startswith(UNSOLICITED) else self.lines).append(line)
        self.changed.set()

    def clear(self) -> None:
        self.lines.clear()

    async def until_final(self, seconds: float) -> bytes:
        """Waits for a final result line (OK or ERROR) and returns the reply's lines joined."""

        async def wait() -> bytes:
            while not any(line in (b"OK\r\n", b"ERROR\r\n") for line in self.lines):
                self.changed.clear()
                await self.changed.wait()
            return b"".join(self.lines)

        return await bounded(wait(), seconds, f"reply (so far {b''.join(self.lines) + self.buffer!r})")


async def find_device() -> tuple[BLEDevice, AdvertisementData]:
    """Scans with the service filter until xTalk-0001 advertises."""
    found: asyncio.Future[tuple[BLEDevice, AdvertisementData]] = asyncio.get_running_loop().create_future()
    seen: dict[str, Optional[str]] = {}

    def detected(device: BLEDevice, advertisement: AdvertisementData) -> None:
        seen[device.address] = advertisement.local_name
        if device.address.upper() == ADDRESS and not found.done():
            found.set_result((device, advertisement))

    async with BleakScanner(detected, service_uuids=[SERVICE]):
        try:
            return await asyncio.wait_for(found, SCAN_TIMEOUT)
        except asyncio.TimeoutError:
            raise CheckFailed(f"{ADDRESS} not found within {SCAN_TIMEOUT:g} s (saw {seen})") from None


def gatt_database(client: BleakClient) -> set[str]:
    """The client's view of the GATT database: one line per service, characteristic and descriptor."""
    lines = set()
    for service in client.services:
        lines.add(f"service {service.uuid} handle {service.handle}")
        for c in service.characteristics:
            flags = ",".join(sorted(c.properties))
            lines.add(f"characteristic {c.uuid} handle {c.handle} [{flags}] {c.max_write_without_response_size}")
            for d in c.descriptors:
                lines.add(f"descriptor {d.uuid} handle {d.handle} of {c.uuid}")
    return lines


def difference(mine: set[str], theirs: set[str]) -> str:
    return "; ".join(
        [f"only in the first: {line}" for line in sorted(mine - theirs)]
        + [f"only in the second: {line}" for line in sorted(theirs - mine)]
    )


def in_own_loop(work: Callable[[], Coroutine[Any, Any, T]]) -> "asyncio.Future[T]":
    """Runs `work` in a new event loop on a daemon thread (a second bleak session: bleak keeps one BlueZ
    manager, so one GetManagedObjects view, per event loop). A daemon thread never holds up the exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(settle: Callable[[], None]) -> None:
        if not future.done():  # not given up on (timed out) yet
            settle()

    def body() -> None:
        try:
            result = asyncio.run(work())
            settle = lambda: future.set_result(result)  # noqa: E731
        except BaseException as error:  # handed to the waiting loop
            failure = error  # (`error` is unbound after the except clause)
            settle = lambda: future.set_exception(failure)  # noqa: E731
        try:
            loop.call_soon_threadsafe(deliver, settle)
        except RuntimeError:  # the main loop is gone: nobody waits any more
            pass

    threading.Thread(target=body, name="second bleak session", daemon=True).start()
    return future


async def second_session(device: BLEDevice) -> tuple[set[str], bool]:
    """Another bleak session (its own event loop, so its own D-Bus connection and GetManagedObjects) joins the
    connection the first one made, as a second program would: returns its view of the GATT database and whether
    it was connected, then disconnects the device (Device1.Disconnect, for every client)."""
    client = BleakClient(device, timeout=CONNECT_TIMEOUT)
    await bounded(client.connect(), CONNECT_TIMEOUT + 1, "second session's connect")
    try:
        return gatt_database(client), client.is_connected
    finally:
        await bounded(client.disconnect(), DISCONNECT_TIMEOUT, "second session's disconnect")


async def control(member: str, signature: str, body: list[Any]) -> list[Any]:
    """Calls the fake's control interface (com.xtalk.FakeBlueZ1 at /com/xtalk/FakeBlueZ) on the same bus;
    returns the reply's body."""
    bus = await bounded(MessageBus(bus_type=BusType.SYSTEM).connect(), 5, "connecting to the bus")
    try:
        reply = await bounded(
            bus.call(
                Message(
                    destination="org.bluez",
                    path="/com/xtalk/FakeBlueZ",
                    interface="com.xtalk.FakeBlueZ1",
                    member=member,
                    signature=signature,
                    body=body,
                )
            ),
            5,
            f"{member} reply",
        )
        expect(
            reply is not None and reply.message_type == MessageType.METHOD_RETURN,
            f"{member} failed: {reply and reply.error_name} {reply and reply.body}",
        )
        assert reply is not None
        return list(reply.body)
    finally:
        bus.disconnect()


class Checker:
    def __init__(self) -> None:
        self.checks = 0
        self.failures = 0
        self.device: Optional[BLEDevice] = None
        self.advertisement: Optional[AdvertisementData] = None
        self.client: Optional[BleakClient] = None
        self.database: set[str] = set()
        self.lines = Lines()
        self.disconnected = asyncio.Event()
        self.disconnects = 0

    async def run(self, name: str, body: Callable[[], Awaitable[None]], needs: Any = True) -> bool:
        self.checks += 1
        if not needs:
            print(f"FAIL {name}: skipped, an earlier check failed", flush=True)
            self.failures += 1
            return False
        started = time.monotonic()
        try:
            await body()
        except CheckFailed as error:
            print(f"FAIL {name}: {error}", flush=True)
            self.failures += 1
            return False
        except Exception as error:  # bleak's errors, D-Bus errors: a failure of this check, not a crash
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            self.failures += 1
            return False
        print(f"PASS {name} ({(time.monotonic() - started) * 1000:.0f} ms)", flush=True)
        return True

    def on_disconnected(self, _: BleakClient) -> None:
        self.disconnects += 1
        self.disconnected.set()

    # The checks, in order.

    async def scan(self) -> None:
        self.device, self.advertisement = await find_device()
        device, advertisement = self.device, self.advertisement
        expect(device.name == NAME, f"device name {device.name!r}, wanted {NAME!r}")
        expect(advertisement.local_name == NAME, f"local name {advertisement.local_name!r}, wanted {NAME!r}")
        expect(-100 <= advertisement.rssi <= 0, f"RSSI {advertisement.rssi} outside -100..0")
        expect(
            advertisement.manufacturer_data == MANUFACTURER,
            f"manufacturer data {advertisement.manufacturer_data!r}, wanted {MANUFACTURER!r}",
        )
        expect(SERVICE in advertisement.service_uuids, f"service UUIDs {advertisement.service_uuids}")

    async def connect(self) -> None:
        assert self.device is not None
        self.client = BleakClient(self.device, disconnected_callback=self.on_disconnected, timeout=CONNECT_TIMEOUT)
        await bounded(self.client.connect(), CONNECT_TIMEOUT + 1, "connect")
        expect(self.client.is_connected, "is_connected is False after connect()")
        expect(self.client.address.upper() == ADDRESS, f"client address {self.client.address}")

    async def services(self) -> None:
        assert self.client is not None
        service = self.client.services.get_service(SERVICE)
        expect(service is not None, f"no service {SERVICE} in {[s.uuid for s in self.client.services]}")
        assert service is not None
        characteristics = {c.uuid: c for c in service.characteristics}
        expect(set(characteristics) == {TX, RX}, f"characteristics {sorted(characteristics)}, wanted TX and RX")
        tx, rx = characteristics[TX], characteristics[RX]
        expect(
            sorted(tx.properties) == ["write", "write-without-response"],
            f"TX properties {tx.properties}, wanted write-without-response and write",
        )
        expect(rx.properties == ["notify"], f"RX properties {rx.properties}, wanted notify")
        expect(tx.service_uuid == SERVICE and rx.service_uuid == SERVICE, "characteristics name another service")
        expect(tx.handle != rx.handle, f"TX and RX share handle {tx.handle}")
        expect(tx.max_write_without_response_size >= 20, f"TX write size {tx.max_write_without_response_size}")
        expect([d.uuid for d in rx.descriptors] == [CCCD], f"RX descriptors {[d.uuid for d in rx.descriptors]}")
        expect(tx.descriptors == [], f"TX descriptors {[d.uuid for d in tx.descriptors]}")
        self.database = gatt_database(self.client)

    async def second_session(self) -> None:
        # A program started while the link is up builds its objects from GetManagedObjects, not from the
        # signals of the connect: it must see the same services, characteristics and descriptors.
        assert self.client is not None and self.device is not None
        self.disconnected.clear()
        self.disconnects = 0
        device = self.device
        mine = gatt_database(self.client)
        database, connected = await bounded(
            in_own_loop(lambda: second_session(device)),
            CONNECT_TIMEOUT + DISCONNECT_TIMEOUT + 2,
            "second session",
        )
        expect(connected, "the second session is not connected")
        expect(database == mine, f"another view of the GATT database: {difference(mine, database)}")
        # Its Disconnect ends the link for everyone: this client sees it too.
        await bounded(self.disconnected.wait(), DISCONNECT_TIMEOUT, "disconnected_callback after its Disconnect")
        expect(not self.client.is_connected, "is_connected still True after the other session's Disconnect")

    async def start_notify(self) -> None:
        assert self.client is not None
        await bounded(self.client.start_notify(RX, self.lines.on_notification), REPLY_TIMEOUT, "start_notify")

    async def acquire_mtu(self) -> None:
        # bleak's documented way to learn the MTU on BlueZ: AcquireWrite on a write-without-response
        # characteristic, a socket passed over D-Bus (UNIX_FD) and the MTU; bleak closes the socket at once.
        # The writes that follow (WriteValue) must work: closing it released BlueZ's lock.
        assert self.client is not None
        await bounded(self.client._backend._acquire_mtu(), REPLY_TIMEOUT, "_acquire_mtu (AcquireWrite)")
        expect(self.client.mtu_size == MTU, f"MTU {self.client.mtu_size}, wanted {MTU}")

    async def ping(self, token: str, response: bool) -> None:
        assert self.client is not None
        self.lines.clear()
        await bounded(
            self.client.write_gatt_char(TX, f"AT+PING={token}\r\n".encode(), response=response),
            REPLY_TIMEOUT,
            "write",
        )
        reply = await self.lines.until_final(REPLY_TIMEOUT)
        wanted = f"+PING:{token}\r\nOK\r\n".encode()
        expect(reply == wanted, f"reply {reply!r}, wanted {wanted!r}")

    async def write_socket(self) -> None:
        # The SDK's main write path on Linux, checked by a client we did not write: AcquireWrite (dbus-fast,
        # as bleak's own _acquire_mtu calls it) hands over a SOCK_SEQPACKET socket and the MTU; each packet
        # written on it is one ATT write. A packet of MTU - 3 bytes arrives; one byte longer is dropped, as
        # BlueZ's ATT layer refuses it (the ping after it gets its own answer, not the long line's). Closing
        # the socket releases BlueZ's lock (the WriteValue checks after this one need it).
        assert self.client is not None
        tx = self.client.services.get_characteristic(TX)
        expect(tx is not None, "no TX characteristic")
        assert tx is not None
        bus = await bounded(
            MessageBus(bus_type=BusType.SYSTEM, negotiate_unix_fd=True).connect(), 5, "connecting to the bus"
        )
        try:
            reply = await bounded(
                bus.call(
                    Message(
                        destination="org.bluez",
                        path=tx.obj[0],
                        interface="org.bluez.GattCharacteristic1",
                        member="AcquireWrite",
                        signature="a{sv}",
                        body=[{}],
                    )
                ),
                REPLY_TIMEOUT,
                "AcquireWrite reply",
            )
        finally:
            bus.disconnect()
        expect(
            reply is not None and reply.message_type == MessageType.METHOD_RETURN,
            f"AcquireWrite failed: {reply and reply.error_name} {reply and reply.body}",
        )
        assert reply is not None
        expect(len(reply.unix_fds) == 1, f"AcquireWrite passed {len(reply.unix_fds)} descriptors, wanted 1")
        descriptor = reply.unix_fds[0]
        try:
            mtu = reply.body[1]
            expect(mtu == MTU, f"AcquireWrite's MTU {mtu}, wanted {MTU}")
            probe = socket.socket(fileno=os.dup(descriptor))
            kind = probe.type
            probe.close()
            expect(kind == socket.SOCK_SEQPACKET, f"the socket is {kind!r}, wanted SOCK_SEQPACKET")

            async def command(packet: bytes, wanted: bytes) -> None:
                self.lines.clear()
                expect(len(packet) <= mtu - 3, f"test packet of {len(packet)} bytes")
                expect(os.write(descriptor, packet) == len(packet), "short write")
                got = await self.lines.until_final(REPLY_TIMEOUT)
                expect(got == wanted, f"reply {got!r}, wanted {wanted!r}")

            await command(b"AT+PING=socket\r\n", b"+PING:socket\r\nOK\r\n")
            # Exactly MTU - 3 bytes, one packet: an unknown command, so the radio's ERROR says it arrived.
            longest = b"AT+" + b"L" * (mtu - 3 - len(b"AT+\r\n")) + b"\r\n"
            await command(longest, b"ERROR\r\n")
            [dropped_before] = await control("DroppedRadioWrites", "s", [ADDRESS])
            self.lines.clear()
            oversize = b"AT+" + b"O" * (mtu - 2 - len(b"AT+\r\n")) + b"\r\n"
            expect(len(oversize) == mtu - 2, f"oversize packet of {len(oversize)} bytes")
            expect(os.write(descriptor, oversize) == len(oversize), "short write (oversize)")
            # The ping after it gets its own answer first: the oversize packet was dropped (processed, its
            # ERROR would have come first).
            await command(b"AT+PING=after\r\n", b"+PING:after\r\nOK\r\n")
            # Dropped by BlueZ, not by the radio's link: bluetoothd never put it on the air.
            [dropped_after] = await control("DroppedRadioWrites", "s", [ADDRESS])
            expect(
                dropped_after == dropped_before,
                f"the radio's link dropped {dropped_after - dropped_before} writes: BlueZ handed it the oversize one",
            )
        finally:
            os.close(descriptor)

    async def in_progress(self) -> None:
        # BlueZ answers org.bluez.Error.InProgress while another operation on the characteristic runs; bleak
        # retries such a write. The fake's error must be BlueZ's, by name, for that to work.
        await control("FailNext", "ss", ["WriteValue", "InProgress"])
        await self.ping("retried", response=True)

    async def link_loss(self) -> None:
        assert self.client is not None
        self.disconnected.clear()
        self.disconnects = 0
        await control("LoseLink", "ss", [ADDRESS, "remote"])
        await bounded(self.disconnected.wait(), DISCONNECT_TIMEOUT, "disconnected_callback")
        deadline = time.monotonic() + DISCONNECT_TIMEOUT
        while self.client.is_connected and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        expect(not self.client.is_connected, "is_connected still True")
        await asyncio.sleep(0.2)  # one link loss, one callback
        expect(self.disconnects == 1, f"disconnected_callback fired {self.disconnects} times")

    async def reconnect(self) -> None:
        # After a disconnection the device stays known to BlueZ: the same client connects again and
        # resolves the same services.
        assert self.client is not None
        before = self.database
        if self.client.is_connected:  # an earlier check failed half-way
            await bounded(self.client.disconnect(), DISCONNECT_TIMEOUT, "disconnect")
        await bounded(self.client.connect(), CONNECT_TIMEOUT + 1, "connect")
        expect(self.client.is_connected, "is_connected is False after connect()")
        after = gatt_database(self.client)
        expect(not before or after == before, f"other services after reconnecting: {difference(before, after)}")

    async def reconnect_and_ping(self) -> None:
        await self.reconnect()
        assert self.client is not None
        self.lines = Lines()
        await bounded(self.client.start_notify(RX, self.lines.on_notification), REPLY_TIMEOUT, "start_notify")
        await self.ping("again", response=False)

    async def disconnect(self) -> None:
        assert self.client is not None
        self.disconnected.clear()
        self.disconnects = 0
        await bounded(self.client.disconnect(), DISCONNECT_TIMEOUT, "disconnect")
        expect(not self.client.is_connected, "is_connected still True after disconnect()")
        expect(self.disconnects == 1, f"disconnected_callback fired {self.disconnects} times")

    async def all(self) -> int:
        try:
            scanned = await self.run("scan", self.scan)
            connected = await self.run("connect", self.connect, scanned)
            await self.run("services", self.services, connected)
            await self.run("second session: same GATT database, its Disconnect", self.second_session, connected)
            connected = await self.run("reconnect", self.reconnect, connected)
            notifying = await self.run("start_notify", self.start_notify, connected)
            await self.run("AcquireWrite gives the MTU and a socket", self.acquire_mtu, connected)
            await self.run("write-without-response ping", lambda: self.ping("bleak", False), notifying)
            await self.run("write-with-response ping", lambda: self.ping("bleak", True), notifying)
            await self.run("AcquireWrite socket: MTU - 3 arrives, longer is dropped", self.write_socket, notifying)
            await self.run("WriteValue InProgress is retried", self.in_progress, notifying)
            lost = await self.run("link loss (remote)", self.link_loss, notifying)
            reconnected = await self.run("reconnect after link loss, ping", self.reconnect_and_ping, lost)
            await self.run("disconnect", self.disconnect, reconnected)
        finally:
            if self.client is not None and self.client.is_connected:
                try:
                    await asyncio.wait_for(self.client.disconnect(), DISCONNECT_TIMEOUT)
                except Exception:
                    pass
        print(f"{self.checks - self.failures} passed, {self.failures} failed", flush=True)
        return 1 if self.failures else 0


async def ping(count: int) -> int:
    device, _ = await find_device()
    lines = Lines()
    async with BleakClient(device, timeout=CONNECT_TIMEOUT) as client:
        await bounded(client.start_notify(RX, lines.on_notification), REPLY_TIMEOUT, "start_notify")
        round_trips: list[float] = []
        for i in range(count):
            lines.clear()
            started = time.perf_counter()
            await bounded(client.write_gatt_char(TX, f"AT+PING={i}\r\n".encode(), response=False), 5, "write")
            reply = await lines.until_final(REPLY_TIMEOUT)
            round_trips.append(round((time.perf_counter() - started) * 1000, 2))
            wanted = f"+PING:{i}\r\nOK\r\n".encode()
            expect(reply == wanted, f"round trip {i}: reply {reply!r}, wanted {wanted!r}")
    print(json.dumps({"round_trips_ms": round_trips}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    usage = "usage: bleak_check.py [check | ping N]   (with DBUS_SYSTEM_BUS_ADDRESS set to the fake's bus)"
    if not os.environ.get("DBUS_SYSTEM_BUS_ADDRESS"):
        print("bleak_check.py: DBUS_SYSTEM_BUS_ADDRESS is not set (start `xtalk fake-bluez` first)", file=sys.stderr)
        return 2
    mode = argv[1] if len(argv) > 1 else "check"
    if mode == "check" and len(argv) <= 2:
        work = Checker().all()
    elif mode == "ping" and len(argv) == 3 and argv[2].isdigit() and int(argv[2]) > 0:
        work = ping(int(argv[2]))
    else:
        print(usage, file=sys.stderr)
        return 2

    async def whole() -> int:
        return await bounded(work, WHOLE_RUN_TIMEOUT, "the whole run")

    try:
        return asyncio.run(whole())
    except CheckFailed as error:
        print(f"FAIL {mode}: {error}", flush=True)
        return 1
    except Exception as error:  # bleak's errors, D-Bus errors
        print(f"FAIL {mode}: {type(error).__name__}: {error}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
