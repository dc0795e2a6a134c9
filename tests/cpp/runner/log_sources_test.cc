// The incident-log sources of runner/incident/link_log.h beyond the kernel and `ip monitor`:
// switch logs, RDMA port lines and ibstat dumps, NCCL / PyTorch / ncclras symptoms, the
// per-line clock samples and year handling, and lines that start like a source but cannot be
// read (a warning with file:line, never an exception).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runner/incident/link_log.h"

namespace faultline::runner {
namespace {

constexpr int64_t kS = 1'000'000'000;
// 2026-11-28T03:14:07Z
constexpr int64_t kT0 = 1795835647LL * kS;

std::string Warnings(const ParsedLog& p) {
  std::string out;
  for (const LogWarning& w : p.warnings) {
    out += w.file + ":" + std::to_string(w.line) + ": " + w.reason + "\n";
  }
  return out;
}

TEST(LogClock, SyslogWithKernelStampsGivesASampleForEveryLine) {
  const char* log = R"(Nov 28 03:14:07 gpu-node17 kernel: [ 8123.402113] mlx5_core 0000:08:00.0 eth2: Link down
Nov 28 03:14:07 gpu-node17 kernel: [ 8123.500000] nvme nvme0: I/O 12 QID 3 timeout
2026-11-28T03:14:08.123456+00:00 gpu-node18 kernel: [   99.250000] EXT4-fs (sda1): mounted
[ 8124.000000] a dmesg line has no wall clock
Nov 28 03:14:09 gpu-node17 systemd[1]: Started something.
)";
  ParsedLog p = ParseIncidentLog(log, "syslog", "fallback", 2026);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 1u);
  const LinkEvent& e = p.links[0];
  EXPECT_EQ(e.source, LinkSource::kKernel);
  EXPECT_STREQ(LinkSourceName(e.source), "kernel");
  EXPECT_EQ(e.node, "gpu-node17");
  EXPECT_EQ(*e.wall_ns, kT0);  // the year from the parameter
  EXPECT_TRUE(e.year_assumed);
  EXPECT_EQ(e.wall_res_ns, kS);
  ASSERT_EQ(p.clocks.size(), 3u);  // lines 1, 2 (not a link event) and 3
  EXPECT_EQ(p.clocks[0].line, 1);
  EXPECT_EQ(p.clocks[1].line, 2);
  EXPECT_EQ(p.clocks[1].node, "gpu-node17");
  EXPECT_DOUBLE_EQ(p.clocks[1].kernel_s, 8123.5);
  EXPECT_EQ(p.clocks[1].wall_ns, kT0);
  EXPECT_TRUE(p.clocks[1].year_assumed);
  EXPECT_EQ(p.clocks[2].node, "gpu-node18");
  EXPECT_EQ(p.clocks[2].wall_ns, kT0 + kS + 123'456'000);
  EXPECT_EQ(p.clocks[2].wall_res_ns, 1000);  // six digits: 1 us
  EXPECT_FALSE(p.clocks[2].year_assumed);
  EXPECT_DOUBLE_EQ(p.clocks[2].kernel_s, 99.25);
}

TEST(LogClock, YearParameterAndDefaults) {
  const char* log = "Nov 28 03:14:07 h1 kernel: mlx5_core 0000:08:00.0 eth2: Link down\n"
                    "[ 1.5] mlx5_core 0000:08:00.0 eth2: Link up\n";
  ParsedLog a = ParseIncidentLog(log, "k", "node-a", 2026);
  ParsedLog b = ParseIncidentLog(log, "k", "node-a", 2025);
  ASSERT_EQ(a.links.size(), 2u);
  ASSERT_EQ(b.links.size(), 2u);
  EXPECT_EQ(*a.links[0].wall_ns - *b.links[0].wall_ns, 365LL * 86400 * kS);
  EXPECT_EQ(a.links[1].node, "node-a");  // no host on the line: the parameter
  EXPECT_FALSE(a.links[1].wall_ns.has_value());
  EXPECT_EQ(a.links[1].wall_res_ns, 0);
  EXPECT_FALSE(a.links[1].year_assumed);
  EXPECT_TRUE(a.clocks.empty());
  // dmesg -T and ISO stamps carry their year.
  ParsedLog t = ParseIncidentLog("[Sat Nov 28 03:14:07 2026] ice 0000:3b:00.0 ens1f0: NIC Link is Down\n",
                                 "t", "", 1999);
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(*t.links[0].wall_ns, kT0);
  EXPECT_FALSE(t.links[0].year_assumed);
  EXPECT_EQ(t.links[0].wall_res_ns, kS);
}

TEST(LogClock, IpMonitorSourceAndResolution) {
  const char* log = R"(Timestamp: Sat Nov 28 03:14:07 2026 402113 usec
3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN group default
[2026-11-28T03:14:07.5] [LINK]3: eth2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 state UP
)";
  ParsedLog p = ParseIncidentLog(log, "ipmon");
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[0].source, LinkSource::kIpMonitor);
  EXPECT_EQ(*p.links[0].wall_ns, kT0 + 402'113'000);
  EXPECT_EQ(p.links[0].wall_res_ns, 1000);
  EXPECT_EQ(p.links[1].wall_res_ns, 100'000'000);  // one digit: 0.1 s
  EXPECT_EQ(*p.links[1].wall_ns, kT0 + 500'000'000);
}

TEST(SwitchLog, SonicUpAndDown) {
  const char* log = R"(Nov 28 03:14:07.654321 sonic-leaf1 NOTICE swss#orchagent: :- updatePortOperStatus: Port Ethernet8 oper state set from up to down
Nov 28 03:14:07.700000 sonic-leaf1 NOTICE swss#orchagent: :- setHostIntfsOperStatus: Set operation status DOWN to host interface Ethernet8
Nov 28 03:14:09.100000 sonic-leaf1 NOTICE swss#orchagent: :- updatePortOperStatus: Port Ethernet8 oper state set from down to up
Nov 28 03:14:10.000000 sonic-leaf1 NOTICE swss0#orchagent: :- updatePortOperStatus: Port PortChannel0001 oper state set from up to down
)";
  ParsedLog p = ParseIncidentLog(log, "sonic.log", "", 2026);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 3u);
  EXPECT_EQ(p.links[0].source, LinkSource::kSwitch);
  EXPECT_STREQ(LinkSourceName(p.links[0].source), "switch");
  EXPECT_EQ(p.links[0].node, "sonic-leaf1");
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"Ethernet8"}));
  EXPECT_FALSE(p.links[0].up);
  EXPECT_EQ(*p.links[0].wall_ns, kT0 + 654'321'000);
  EXPECT_EQ(p.links[0].wall_res_ns, 1000);
  EXPECT_TRUE(p.links[0].year_assumed);
  EXPECT_TRUE(p.links[1].up);
  EXPECT_EQ(p.links[1].line, 3);
  EXPECT_EQ(p.links[2].names.front(), "PortChannel0001");
}

TEST(SwitchLog, AristaEosUpAndDown) {
  const char* log = R"(Nov 28 03:14:07 arista-leaf2 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet1/1, changed state to down
Nov 28 03:14:07 arista-leaf2 Ebra: %LINK-3-UPDOWN: Interface Ethernet1/1, changed state to down
Nov 28 03:14:08 arista-leaf2 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet1/1, changed state to up
)";
  ParsedLog p = ParseIncidentLog(log, "eos.log", "", 2026);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 3u);
  for (const LinkEvent& e : p.links) {
    EXPECT_EQ(e.source, LinkSource::kSwitch);
    EXPECT_EQ(e.node, "arista-leaf2");
    EXPECT_EQ(e.names, (std::vector<std::string>{"Ethernet1/1"}));
  }
  EXPECT_FALSE(p.links[0].up);
  EXPECT_FALSE(p.links[1].up);
  EXPECT_TRUE(p.links[2].up);
  EXPECT_EQ(*p.links[2].wall_ns, kT0 + kS);
}

TEST(SwitchLog, CumulusSwitchdUpAndDown) {
  const char* log = R"(2026-11-28T03:14:07.100000+00:00 cumulus-leaf3 switchd[5692]: nic.c:213 nic_set_carrier: swp17: setting kernel carrier: down
2026-11-28T03:14:07.100100+00:00 cumulus-leaf3 switchd[5692]: netlink.c:291 libnl: swp17, family 0, ifi 20, oper down
2026-11-28T03:14:09.000000+00:00 cumulus-leaf3 switchd[5692]: nic.c:213 nic_set_carrier: swp17: setting kernel carrier: up
)";
  ParsedLog p = ParseIncidentLog(log, "switchd.log");
  ASSERT_EQ(p.links.size(), 3u);
  EXPECT_EQ(p.links[0].source, LinkSource::kSwitch);
  EXPECT_EQ(p.links[0].node, "cumulus-leaf3");
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"swp17"}));
  EXPECT_FALSE(p.links[0].up);
  EXPECT_EQ(p.links[1].names, (std::vector<std::string>{"swp17"}));
  EXPECT_TRUE(p.links[2].up);
  EXPECT_EQ(*p.links[2].wall_ns, kT0 + 2 * kS);
  EXPECT_FALSE(p.links[2].year_assumed);
}

TEST(SwitchLog, NxosYearFirstAndRelayedAndPortChannelIgnored) {
  const char* log = R"(2026 Nov 28 03:14:07 N9K-1 %ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface Ethernet1/1 is down (Link failure)
2026 Nov 28 03:14:07 N9K-1 %ETH_PORT_CHANNEL-5-PORT_DOWN: port-channel10: Ethernet1/1 is down
2026 Nov 28 03:14:09 N9K-1 %ETHPORT-5-IF_UP: Interface Ethernet1/1 is up in mode access
Nov 28 03:14:01 10.1.1.2 2026 Nov 28 03:14:07.221 UTC: %ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface Ethernet1/2 is down (Link failure)
)";
  ParsedLog p = ParseIncidentLog(log, "nxos.log", "", 1999);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 3u);
  EXPECT_EQ(p.links[0].node, "N9K-1");
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"Ethernet1/1"}));
  EXPECT_FALSE(p.links[0].up);
  EXPECT_EQ(*p.links[0].wall_ns, kT0);  // the year of the line, not the parameter
  EXPECT_FALSE(p.links[0].year_assumed);
  EXPECT_TRUE(p.links[1].up);
  EXPECT_EQ(p.links[1].line, 3);
  // Through a syslog relay: the switch's own stamp (year, ms) wins over the relay's.
  EXPECT_EQ(p.links[2].node, "10.1.1.2");
  EXPECT_EQ(p.links[2].names.front(), "Ethernet1/2");
  EXPECT_EQ(*p.links[2].wall_ns, kT0 + 221'000'000);
  EXPECT_EQ(p.links[2].wall_res_ns, 1'000'000);
  EXPECT_FALSE(p.links[2].year_assumed);
}

TEST(SwitchLog, UnreadableSwitchLinesAreWarnings) {
  const char* log = R"(2026 Nov 28 03:14:09 N9K-1 %ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface
Nov 28 03:14:07 sonic-leaf1 NOTICE swss#orchagent: :- updatePortOperStatus: Port Ethernet8 oper state set from up to
Nov 28 03:14:07 arista-leaf2 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface Ethernet1/1, changed sta
)";
  ParsedLog p = ParseIncidentLog(log, "sw.log");
  EXPECT_TRUE(p.links.empty());
  ASSERT_EQ(p.warnings.size(), 3u) << Warnings(p);
  EXPECT_EQ(p.warnings[0].file, "sw.log");
  EXPECT_EQ(p.warnings[0].line, 1);
  EXPECT_NE(p.warnings[0].reason.find("NX-OS"), std::string::npos);
  EXPECT_EQ(p.warnings[1].line, 2);
  EXPECT_NE(p.warnings[1].reason.find("SONiC"), std::string::npos);
  EXPECT_EQ(p.warnings[2].line, 3);
}

TEST(RdmaPort, KernelPortStateLines) {
  const char* log = R"([  500.100000] infiniband mlx5_0: port 1 state changed from ACTIVE to DOWN
[  501.100000] mlx5_ib: mlx5_1: IB_EVENT_PORT_ERR on port 1 (netdev ens1f1)
[  502.100000] ib_core: mlx5_1 port 1 state ACTIVE
[  503.000000] infiniband mlx5_0: port 1 state changed from DOWN to ACTIVE
[  504.000000] infiniband mlx5_0: ib_query_port failed (-22)
)";
  ParsedLog p = ParseIncidentLog(log, "dmesg", "gpu-node17");
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 4u);
  EXPECT_EQ(p.links[0].source, LinkSource::kRdmaPort);
  EXPECT_STREQ(LinkSourceName(p.links[0].source), "rdma_port");
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"mlx5_0/1"}));
  EXPECT_FALSE(p.links[0].up);
  EXPECT_EQ(p.links[0].node, "gpu-node17");
  EXPECT_DOUBLE_EQ(*p.links[0].kernel_s, 500.1);
  EXPECT_EQ(p.links[1].names, (std::vector<std::string>{"mlx5_1/1", "ens1f1"}));
  EXPECT_FALSE(p.links[1].up);
  EXPECT_TRUE(p.links[2].up);
  EXPECT_TRUE(p.links[3].up);
  // The existing mlx5_core forms stay kernel events named by PCI address.
  ParsedLog k = ParseIncidentLog("[1.0] mlx5_core 0000:01:00.1: Port state changed to ACTIVE\n", "d");
  ASSERT_EQ(k.links.size(), 1u);
  EXPECT_EQ(k.links[0].source, LinkSource::kKernel);
}

TEST(RdmaPort, IbstatSnapshotsThatDifferGiveEvents) {
  const char* log = "# 2026-11-28T03:14:07Z\n"
                    "CA 'mlx5_0'\n"
                    "\tCA type: MT4123\n"
                    "\tNumber of ports: 1\n"
                    "\tPort 1:\n"
                    "\t\tState: Active\n"
                    "\t\tPhysical state: LinkUp\n"
                    "\t\tRate: 200\n"
                    "CA 'mlx5_1'\n"
                    "\tPort 1:\n"
                    "\t\tState: Active\n"
                    "\t\tPhysical state: LinkUp\n"
                    "Sat Nov 28 03:14:17 UTC 2026\n"                 // line 13
                    "CA 'mlx5_0'\n"
                    "\tPort 1:\n"
                    "\t\tState: Down\n"                              // line 16
                    "\t\tPhysical state: Polling\n"
                    "CA 'mlx5_1'\n"
                    "\tPort 1:\n"
                    "\t\tState: Active\n"
                    "# 2026-11-28T03:14:27.5Z\n"
                    "CA 'mlx5_0'\n"
                    "\tPort 1:\n"
                    "\t\tState: Active\n";                           // line 24
  ParsedLog p = ParseIncidentLog(log, "ibstat.txt", "gpu-node17");
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[0].source, LinkSource::kRdmaPort);
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"mlx5_0/1"}));
  EXPECT_FALSE(p.links[0].up);
  EXPECT_EQ(p.links[0].line, 16);
  EXPECT_EQ(p.links[0].node, "gpu-node17");
  EXPECT_EQ(*p.links[0].wall_ns, kT0 + 10 * kS);
  EXPECT_EQ(p.links[0].wall_res_ns, kS);
  EXPECT_TRUE(p.links[1].up);
  EXPECT_EQ(p.links[1].line, 24);
  EXPECT_EQ(*p.links[1].wall_ns, kT0 + 20 * kS + 500'000'000);
}

TEST(RdmaPort, UnterminatedIbstatBlocksAreWarnings) {
  const char* log = "CA 'mlx5_0'\n"
                    "\tPort 1:\n"
                    "\t\tPhysical state: LinkUp\n"
                    "CA 'mlx5_1'\n"
                    "\tPort 99999999999:\n"
                    "\t\tState: Active\n"
                    "\tPort 2:\n"
                    "\t\tState: Sleeping\n"
                    "CA 'mlx5_2'\n"
                    "\tPort 1:";  // cut off at the end
  ParsedLog p = ParseIncidentLog(log, "ibstat.txt");
  EXPECT_TRUE(p.links.empty());
  ASSERT_EQ(p.warnings.size(), 4u) << Warnings(p);
  EXPECT_EQ(p.warnings[0].line, 2);
  EXPECT_NE(p.warnings[0].reason.find("mlx5_0/1 without a State"), std::string::npos);
  EXPECT_EQ(p.warnings[1].line, 5);
  EXPECT_NE(p.warnings[1].reason.find("out of range"), std::string::npos);
  EXPECT_EQ(p.warnings[2].line, 8);
  EXPECT_EQ(p.warnings[3].line, 10);
}

TEST(NcclSymptom, CompletionErrorsOfThreeNcclVersions) {
  const char* log = R"(node17:12345:12400 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.5<46213> with error 12, opcode 0, len 0, vendor err 129

[2026-11-28 03:14:07] node17:12345:12400 [3] net_ib.cc:1696 NCCL WARN NET/IB: Got completion from peer 10.0.0.5<46213> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.17 remoteGids::ffff:10.0.0.5 hca mlx5_0
5: [2026-11-28 03:14:07.123456] node17:12345:12400 [3] p2p.cc:688 (ncclIbLogCompletionWithError) NCCL WARN NET/IB: Got completion from peer 10.0.0.5<46213> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV(128) vendor_err=129  hca mlx5_1
node17:12345:12400 [3] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0
)";
  ParsedLog p = ParseIncidentLog(log, "rank3.log", "", 2026);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  EXPECT_TRUE(p.links.empty());
  ASSERT_EQ(p.symptoms.size(), 3u);
  for (const Symptom& s : p.symptoms) {
    EXPECT_EQ(s.kind, "ib_completion_error") << s.text;
    EXPECT_EQ(s.node, "node17");
    EXPECT_EQ(*s.pid, 12345);
    EXPECT_EQ(*s.local_rank, 3);
    EXPECT_EQ(s.peer, "10.0.0.5<46213>");
    EXPECT_EQ(*s.wc_status, 12);
    EXPECT_EQ(s.file, "rank3.log");
  }
  EXPECT_EQ(p.symptoms[0].line, 1);
  EXPECT_TRUE(p.symptoms[0].hca.empty());
  EXPECT_FALSE(p.symptoms[0].wall_ns.has_value());
  EXPECT_FALSE(p.symptoms[0].global_rank.has_value());
  EXPECT_EQ(p.symptoms[1].line, 3);
  EXPECT_EQ(p.symptoms[1].hca, "mlx5_0");
  EXPECT_EQ(*p.symptoms[1].wall_ns, kT0);
  EXPECT_EQ(p.symptoms[1].wall_res_ns, kS);
  EXPECT_TRUE(p.symptoms[1].zone_assumed);
  EXPECT_FALSE(p.symptoms[1].year_assumed);
  EXPECT_EQ(p.symptoms[2].hca, "mlx5_1");
  EXPECT_EQ(*p.symptoms[2].global_rank, 5);  // srun --label
  EXPECT_EQ(*p.symptoms[2].wall_ns, kT0 + 123'456'000);
  EXPECT_EQ(p.symptoms[2].wall_res_ns, 1000);
}

TEST(NcclSymptom, AsyncSocketVerbsAndJournalHeader) {
  const char* log = R"(node17:12345:12401 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error
node17:12345:12401 [0] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port error(10)
node17:12345:12402 [1] NCCL WARN socketProgress: Connection closed by remote peer node18<39421>
node17:12345:12402 [1] NCCL WARN NET/Socket : peer 10.0.0.6<50112> message truncated : receiving 4 bytes instead of 8.
node17:12345:12402 [1] NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_0:1
2026-11-28T03:14:07.500000+00:00 gpu-node17 python[12345]: node17:12345:12402 [2] NCCL WARN NET/IB : mlx5_3:1 Got async event : port error
)";
  ParsedLog p = ParseIncidentLog(log, "nccl.log");
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.symptoms.size(), 6u);
  EXPECT_EQ(p.symptoms[0].kind, "ib_async_event");
  EXPECT_EQ(p.symptoms[0].hca, "mlx5_0:1");
  EXPECT_EQ(p.symptoms[1].kind, "ib_async_event");
  EXPECT_EQ(p.symptoms[1].hca, "mlx5_2:1");
  EXPECT_EQ(p.symptoms[2].kind, "socket_error");
  EXPECT_EQ(p.symptoms[2].peer, "node18<39421>");
  EXPECT_EQ(p.symptoms[3].kind, "socket_error");
  EXPECT_EQ(p.symptoms[3].peer, "10.0.0.6<50112>");
  EXPECT_EQ(p.symptoms[4].kind, "ib_verbs_error");
  EXPECT_EQ(p.symptoms[5].kind, "ib_async_event");
  EXPECT_EQ(p.symptoms[5].node, "node17");  // NCCL's host, not the journal's spelling
  EXPECT_EQ(*p.symptoms[5].local_rank, 2);
  EXPECT_EQ(*p.symptoms[5].wall_ns, kT0 + 500'000'000);
  EXPECT_FALSE(p.symptoms[5].zone_assumed);
}

TEST(NcclSymptom, PytorchWatchdogAbortAndResults) {
  const char* log = R"([rank3]:[E1128 03:14:07.123456789 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
[rank3]:[E1128 03:14:08.000000 ProcessGroupNCCL.cpp:1700] [Rank 3] NCCL communicator was aborted on rank 3. Original reason for failure was: NCCL error: remote process exited or there was a network error
12: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5
ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
)";
  ParsedLog p = ParseIncidentLog(log, "train.log", "gpu-node17", 2026);
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.symptoms.size(), 5u);
  EXPECT_EQ(p.symptoms[0].kind, "timeout");
  EXPECT_EQ(*p.symptoms[0].global_rank, 3);
  EXPECT_EQ(p.symptoms[0].node, "gpu-node17");
  EXPECT_EQ(*p.symptoms[0].wall_ns, kT0 + 123'456'789);
  EXPECT_EQ(p.symptoms[0].wall_res_ns, 1);
  EXPECT_TRUE(p.symptoms[0].year_assumed);
  EXPECT_EQ(p.symptoms[1].kind, "abort");
  EXPECT_EQ(*p.symptoms[1].global_rank, 3);
  EXPECT_EQ(p.symptoms[2].kind, "remote_error");
  EXPECT_EQ(*p.symptoms[2].global_rank, 12);
  EXPECT_EQ(p.symptoms[3].kind, "remote_error");
  EXPECT_EQ(p.symptoms[4].kind, "system_error");
}

TEST(NcclSymptom, RasJsonStatusAndMonitorEvents) {
  const char* log = R"({
  "nccl_version": "2.29.1",
  "timestamp": "2026-11-28 03:14:07",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0xae94423cfbb2ef4a",
      "size": 4,
      "ranks": [
        {
          "rank": 0, "host": "10.0.0.17", "pid": 4001, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false,
                     "destroy_flag": false, "abort_flag": false}
        },
        {
          "rank": 1, "host": "10.0.0.17", "pid": 4002, "cuda_dev": 1, "nvml_dev": 1,
          "status": {"init_state": 0, "async_error": 6, "finalize_called": false,
                     "destroy_flag": false, "abort_flag": false}
        }
      ],
      "missing_ranks": [
        {
          "rank": 2, "host": "10.0.0.18", "pid": 5001, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"unresponsive": true, "considered_dead": false}
        },
        {
          "rank": 3, "host": "10.0.0.18", "pid": 5002, "cuda_dev": 1, "nvml_dev": 1,
          "status": {"unresponsive": true, "considered_dead": true}
        }
      ]
    }
  ],
  "ras": {"collection_time_sec": 0.012, "timeouts_count": 1}
}
{
  "timestamp": "2026-11-28 03:14:09",
  "group": "LIFECYCLE",
  "event": "PEER_DEAD",
  "peer": {
    "host": "10.0.0.18",
    "pid": 5002,
    "cuda_devs": [1],
    "nvml_devs": [1]
  },
  "details": ""
}
[2026-11-28 03:14:10] PEER_DEAD: Process 5001 on node 10.0.0.18 managing GPU 0
)";
  ParsedLog p = ParseIncidentLog(log, "ras.json");
  EXPECT_TRUE(p.warnings.empty()) << Warnings(p);
  ASSERT_EQ(p.symptoms.size(), 5u);
  for (const Symptom& s : p.symptoms) EXPECT_EQ(s.kind, "ras");
  // The missing ranks first, then ranks with an error.
  EXPECT_EQ(*p.symptoms[0].global_rank, 2);
  EXPECT_EQ(p.symptoms[0].node, "10.0.0.18");
  EXPECT_EQ(*p.symptoms[0].pid, 5001);
  EXPECT_EQ(p.symptoms[0].line, 1);
  EXPECT_EQ(*p.symptoms[0].wall_ns, kT0);
  EXPECT_NE(p.symptoms[0].text.find("unresponsive"), std::string::npos);
  EXPECT_EQ(*p.symptoms[1].global_rank, 3);
  EXPECT_NE(p.symptoms[1].text.find("dead"), std::string::npos);
  EXPECT_EQ(*p.symptoms[2].global_rank, 1);
  EXPECT_NE(p.symptoms[2].text.find("async error 6"), std::string::npos);
  EXPECT_EQ(p.symptoms[3].line, 35);
  EXPECT_EQ(p.symptoms[3].node, "10.0.0.18");
  EXPECT_EQ(*p.symptoms[3].pid, 5002);
  EXPECT_EQ(*p.symptoms[3].local_rank, 1);
  EXPECT_EQ(*p.symptoms[3].wall_ns, kT0 + 2 * kS);
  EXPECT_EQ(p.symptoms[4].line, 47);
  EXPECT_EQ(*p.symptoms[4].pid, 5001);
  EXPECT_EQ(*p.symptoms[4].local_rank, 0);
}

TEST(Malformed, TruncatedAndOutOfRangeNcclLinesAreWarnings) {
  const char* log = "node17:12345:12402 [1] NCCL WARN\n"
                    "node17:12345:12402 [1\n"
                    "node17:99999999999:12402 [1] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n"
                    "node17:12345:12400 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.5<46213> with\n"
                    "[rank3]:[E1128 03:14:07.1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLRE\n"
                    "node17:12345:12402 [1] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n";
  ParsedLog p = ParseIncidentLog(log, "bad.log");
  ASSERT_EQ(p.warnings.size(), 5u) << Warnings(p);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(p.warnings[i].line, i + 1) << Warnings(p);
    EXPECT_EQ(p.warnings[i].file, "bad.log");
  }
  EXPECT_NE(p.warnings[0].reason.find("truncated"), std::string::npos);
  EXPECT_NE(p.warnings[2].reason.find("out of range"), std::string::npos);
  ASSERT_EQ(p.symptoms.size(), 1u);  // only the whole line
  EXPECT_EQ(p.symptoms[0].line, 6);
}

TEST(Malformed, BadAndUnterminatedJson) {
  const char* log = "{\n"
                    "  \"event\": \"PEER_DEAD\", \"peer\": [1, 2\n"
                    "}\n"
                    "{\n"
                    "  \"event\": \"PEER_DEAD\",\n"
                    "node17:12345:12402 [1] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n"
                    "{\n"
                    "  \"event\": \"PEER_DEAD\",\n";
  ParsedLog p = ParseIncidentLog(log, "ras.json");
  ASSERT_EQ(p.warnings.size(), 3u) << Warnings(p);
  EXPECT_EQ(p.warnings[0].line, 1);
  EXPECT_NE(p.warnings[0].reason.find("bad JSON"), std::string::npos);
  EXPECT_EQ(p.warnings[1].line, 4);
  EXPECT_NE(p.warnings[1].reason.find("does not end"), std::string::npos);
  EXPECT_EQ(p.warnings[2].line, 7);
  // The line after the broken document is still read.
  ASSERT_EQ(p.symptoms.size(), 1u);
  EXPECT_EQ(p.symptoms[0].line, 6);
}

TEST(Malformed, CrlfGarbageAndHugeNumbersNeverThrow) {
  std::string log =
      "Nov 28 03:14:07 sonic-leaf1 NOTICE swss#orchagent: :- updatePortOperStatus: Port Ethernet8 oper state set from up to down\r\n"
      "\x01\x02\xff\xfe garbage ";
  log.push_back('\0');
  log +=
      " bytes\r\n"
      "node17:12345:12400 [99999999999999999999] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\r\n"
      "[rank99999999999999]:[E1399 99:99:99.1 x] [Rank 3] NCCL communicator was aborted on rank 99999999999999\r\n"
      "Feb 31 25:61:61 h kernel: [ 1.0] mlx5_core 0000:08:00.0 eth2: Link up\r\n"
      "\tPort 1:\r\n"
      "\t\tState: Down\r\n";
  log.push_back('\0');
  log += std::string(20000, 'x') + "\n";
  ParsedLog p;
  ASSERT_NO_THROW(p = ParseIncidentLog(log, "mixed.log", "", 2026));
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[0].text.back(), 'n');  // the CR is gone
  EXPECT_EQ(p.links[0].names, (std::vector<std::string>{"Ethernet8"}));
  EXPECT_TRUE(p.links[1].up);
  EXPECT_FALSE(p.links[1].wall_ns.has_value());  // Feb 31 25:61 is no time
  // Line 4: the ranks too large for an int are not read (nor wrapped); "[Rank 3]" is.
  ASSERT_EQ(p.symptoms.size(), 1u);
  EXPECT_EQ(p.symptoms[0].line, 4);
  EXPECT_EQ(p.symptoms[0].kind, "abort");
  EXPECT_EQ(*p.symptoms[0].global_rank, 3);
  bool long_line_warned = false;
  for (const LogWarning& w : p.warnings) {
    EXPECT_GE(w.line, 1);
    EXPECT_LE(w.line, 8);
    if (w.line == 8 && w.reason.find("longer than") != std::string::npos) long_line_warned = true;
  }
  EXPECT_TRUE(long_line_warned) << Warnings(p);
  EXPECT_EQ(p.warnings.front().line, 3) << Warnings(p);
}

}  // namespace
}  // namespace faultline::runner
