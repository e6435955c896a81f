import CENet
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "kcp-experiment" { runKCPExperiment(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "udp-loopback" { runUDPLoopback(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "codec" { runCodecBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "codec-entropy" { runCodecEntropyBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "codec-size-lab" { runCodecSizeLab(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "store" { runStoreBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "sync" { runSyncBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "background" { runBackgroundBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "link" { runLinkProxy(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "enet-relay" { runENetRelay(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "fanout" { runFanoutBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "netns-link" { runPacketLink(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "loss" { runLossBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "mqtt-chaos" { runMQTTChaos(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "web" { runWebBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "bridge" { runBridgeBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "restart" { runRestartBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "sealing" { runSealingBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "legacy" { runLegacyBench(Array(CommandLine.arguments.dropFirst(2))) }
print("""
    usage: inkwire-bench SUBCOMMAND [OPTIONS]   (one JSON object per line, then a table)
      kcp-experiment  KCP's latency test, Inkwire and real KCP  udp-loopback  raw UDP round trips
      codec           compact binary codec size and speed       store         room log store
      sync            late-joiner sync of a large board         link          UDP impairment proxy
      enet-relay      the ENet baseline relay                   fanout        relay scale on loopback
      netns-link      packet-level impaired link (root)         loss          packet loss: inkwired, ENet, kcptun
      mqtt-chaos      MQTT proxy: delay, duplicate, burst publishes
      bridge          N daemons bridged through mosquitto       legacy        HYWhiteboard app models: late join, live
      restart         UDP devices offline after a daemon crash and restart
      sealing         bytes sealing adds per datagram and per join; AES-GCM cost
      background      board backgrounds: a late joiner's strokes and image at 0/5 % loss; fan-out bytes
      web             the browser client in headless Chromium: late join, stroke latency
      codec-entropy   the entropy figures behind the codec size target
      codec-size-lab  codec size experiments (cross-validated tables)
    """)
print("inkwire-bench: not yet implemented")
