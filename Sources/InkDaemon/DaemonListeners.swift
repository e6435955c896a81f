import InkUV

extension Daemon {
    /// Binds the configured addresses, or adopts the sockets systemd passed (by name: `udp`,
    /// `tcp`, `legacy` or `legacy-ROOM`, `metrics`, `web`). An adopted kind replaces its flags.
    func openListeners(activation: SocketActivation?) throws(ConfigError) {
        let adopted = activation?.sockets ?? []
        func fds(_ name: String) -> [Int32] { adopted.filter { $0.name == name }.map(\.fd) }
        do {
            let udpFDs = fds("udp")
            if !udpFDs.isEmpty {
                for fd in udpFDs { udp.append(try UDPTransport(socket: try UDPSocket(loop: loop, adopting: fd), daemon: self)) }
            } else {
                for address in config.udp {
                    let socket = try withIPv4Fallback(address) { (address) throws(UVError) in try UDPSocket(loop: loop, bindTo: address) }
                    udp.append(try UDPTransport(socket: socket, daemon: self))
                }
            }
            let tcpFDs = fds("tcp")
            if !tcpFDs.isEmpty {
                for fd in tcpFDs { tcp.append(try TCPTransport(listener: try TCPListener(loop: loop, adopting: fd), daemon: self)) }
            } else {
                for address in config.tcp {
                    tcp.append(try withIPv4Fallback(address) { (address) throws(UVError) in
                        try TCPTransport(listener: try TCPListener(loop: loop, bindTo: address), daemon: self)
                    })
                }
            }
            try openLegacyListeners(adopted: adopted)
            for binding in config.legacyUpload {
                let listener = try TCPListener(loop: loop, bindTo: binding.address)
                legacyUploadListeners.append(try LegacyUploadListener(
                    listener: listener, room: binding.room, networks: binding.networks, context: legacyContext,
                    roomsOf: { [weak self] address in self?.legacyRooms(connectedFrom: address) ?? [] }))
            }
            try openWebListeners(fds("web"))
            if let fd = fds("metrics").first {
                metricsServer = try MetricsServer(loop: loop, adopting: fd) { [weak self] in self?.renderMetrics() ?? "" }
            } else if let address = config.metrics {
                metricsServer = try MetricsServer(loop: loop, bindTo: address) { [weak self] in self?.renderMetrics() ?? "" }
            }
        } catch {
            throw .startFailed("cannot listen: \(error)")
        }
        for transport in udp { logger.info("listening", ["transport": "udp", "address": transport.localAddress?.description ?? "?"]) }
        for transport in tcp { logger.info("listening", ["transport": "tcp", "address": transport.localAddress?.description ?? "?"]) }
        for listener in legacyListeners {
            logger.info("listening", ["transport": "legacy", "address": listener.localAddress?.description ?? "?", "room": listener.room,
                                      "networks": listener.networks.isEmpty ? "any" : listener.networks.map(\.description).joined(separator: ",")])
        }
        for listener in legacyUploadListeners {
            logger.info("listening", ["transport": "legacy_upload", "address": listener.localAddress?.description ?? "?", "room": listener.room ?? "(the app's)"])
        }
        if let address = metricsServer?.localAddress { logger.info("listening", ["transport": "metrics", "address": address]) }
        for listener in web {
            logger.info("listening", ["transport": "web", "address": listener.localAddress?.description ?? "?",
                                      "tls": webCertificate.map { "sha256=\($0.fingerprint)" } ?? "off"])
        }
    }

    /// The web listeners (bound, or adopted as `web`), with TLS from the given or made certificate.
    private func openWebListeners(_ adopted: [Int32]) throws(UVError) {
        guard !adopted.isEmpty || !config.web.isEmpty else { return }
        var context: TLSServerContext?
        do {
            let certificate = try WebCertificate.load(certificateFile: config.webCertFile, keyFile: config.webKeyFile, dataDir: config.dataDir,
                                                      wanted: WebCertificate.wantedNames(listening: config.web.map(\.host)), logger: logger)
            context = try TLSServerContext(certificateFile: certificate.certificateFile, keyFile: certificate.keyFile)
            webCertificate = certificate
            logger.notice("web certificate", ["file": certificate.certificateFile, "sha256": certificate.fingerprint,
                                              "made": certificate.isSelfMade])
        } catch {
            // Without TLS the pages still work over http:// (they cannot seal; they say so).
            metrics.errors(kind: "web_tls").increment()
            logger.error("web listener without TLS: \(error)")
        }
        if !adopted.isEmpty {
            for fd in adopted { web.append(try WebListener(listener: try TCPListener(loop: loop, adopting: fd), daemon: self, tls: context)) }
            return
        }
        for address in config.web {
            web.append(try withIPv4Fallback(address) { (address) throws(UVError) in
                try WebListener(listener: try TCPListener(loop: loop, bindTo: address), daemon: self, tls: context)
            })
        }
    }

    /// Binds `address`; when it is `[::]` and the host has no IPv6, binds `0.0.0.0` instead.
    private func withIPv4Fallback<T>(_ address: SocketAddress, _ bind: (SocketAddress) throws(UVError) -> T) throws(UVError) -> T {
        do {
            return try bind(address)
        } catch {
            guard address.family == .ipv6, address.host == "::", error.code != UVError.addressInUse else { throw error }
            let fallback = SocketAddress.anyIPv4(port: address.port)
            logger.notice("IPv6 unavailable, listening on IPv4 only", ["address": fallback, "error": error])
            return try bind(fallback)
        }
    }

    /// The rooms of the legacy listeners a device at `address` (any port) is connected to.
    func legacyRooms(connectedFrom address: SocketAddress) -> [String] {
        let host = address.unmappedIPv4.withPort(0)
        return Array(Set(legacyListeners.filter { $0.hasPeer(from: host) }.map(\.room))).sorted()
    }

    private func openLegacyListeners(adopted: [SocketActivation.Socket]) throws(UVError) {
        var plain = adopted.filter { $0.name == "legacy" }.map(\.fd)[...]
        let named = adopted.filter { $0.name.hasPrefix("legacy-") }
        if plain.isEmpty && named.isEmpty {
            for binding in config.legacy {
                let listener = try TCPListener(loop: loop, bindTo: binding.address)
                legacyListeners.append(try LegacyListener(listener: listener, room: binding.room, networks: binding.networks, context: legacyContext))
            }
            return
        }
        for socket in named {
            let room = String(socket.name.dropFirst("legacy-".count))
            // The networks of a --legacy flag for the same room, if there is one.
            let networks = config.legacy.first { $0.room == room }?.networks ?? []
            legacyListeners.append(try LegacyListener(listener: try TCPListener(loop: loop, adopting: socket.fd), room: room, networks: networks,
                                                      context: legacyContext))
        }
        // Unnamed legacy sockets take the rooms of the --legacy flags, in order.
        for binding in config.legacy {
            guard let fd = plain.popFirst() else { break }
            legacyListeners.append(try LegacyListener(listener: try TCPListener(loop: loop, adopting: fd), room: binding.room, networks: binding.networks,
                                                      context: legacyContext))
        }
        if !plain.isEmpty { logger.warning("adopted legacy sockets without a room are ignored", ["count": plain.count]) }
    }
}
