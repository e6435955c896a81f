import CENet
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "kcp-experiment" { runKCPExperiment(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "udp-loopback" { runUDPLoopback(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "codec" { runCodecBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "store" { runStoreBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "sync" { runSyncBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "link" { runLinkProxy(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "enet-relay" { runENetRelay(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "fanout" { runFanoutBench(Array(CommandLine.arguments.dropFirst(2))) }
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "netns-link" { runPacketLink(Array(CommandLine.arguments.dropFirst(2))) }
print("inkwire-bench: not yet implemented")
