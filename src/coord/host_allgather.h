// Every rank's record on every rank, gathered host by host: the key
// all-gather of the coordinator.
//
// MPI_Iallgatherv (Open MPI's libnbc) is linear: every rank sends its record
// to every other rank, W - 1 messages per rank and a connection between
// every pair of ranks, so at thousands of ranks it is the first step of the
// protocol to stop scaling (docs/SCALING.md). Here instead:
//  1. each rank sends its record to its host's leader (its lowest rank),
//     over shared memory: R - 1 messages into each leader;
//  2. the leader folds equal records into one entry with its ranks (the
//     ranks of a tensor-parallel group usually report the same key and
//     store), and the leaders exchange their hosts' entries in a Bruck
//     all-gather: ceil(log2 H) rounds of one send and one receive each;
//  3. each leader passes the whole table down its host in a binomial tree.
// Messages per rank: O(R + log H) instead of O(W); bytes: the table, which
// holds each distinct record once per host.
//
// Every transfer is a bounded point-to-point operation of the transport
// (tags kHostAllgatherTag and up); a rank that does not take part makes
// the others throw TimeoutError naming it.
#pragma once

#include "coord/context.h"
#include "coord/transport.h"

#include <string>
#include <vector>

namespace npucache::coord {

// Tags kHostAllgatherTag .. kHostAllgatherTag + 2 * (3 + log2 H) on `net`.
constexpr int kHostAllgatherTag = 200;

std::vector<std::string> host_allgather(const Transport& net, const Hosts& hosts, const std::string& mine,
                                        const mpi::Step& step);
// The same over a communicator (benchmarks).
std::vector<std::string> host_allgather(const mpi::Comm& comm, const Hosts& hosts, const std::string& mine,
                                        const mpi::Step& step);

// Bruck all-gather of one byte string per participant: `peers` are the
// participants' ranks in `net`, `me` this rank's position among them.
// ceil(log2 P) rounds of one sendrecv each (tags tag, tag + 2, ...).
// Returns every participant's string, by position.
std::vector<std::string> bruck_allgather(const Transport& net, const std::vector<int>& peers, int me,
                                         const std::string& mine, int tag, const mpi::Step& step);

// The table format (pure, for tests): entries of (record, ranks).
struct TableEntry {
  std::string record;
  std::vector<int> ranks;
};
std::string encode_table(const std::vector<TableEntry>& entries);
std::vector<TableEntry> decode_table(const std::string& bytes);
// Equal records folded into one entry, ranks in order.
std::vector<TableEntry> fold(const std::vector<std::pair<int, std::string>>& records);
// Each rank's record from a table covering ranks 0..world-1.
std::vector<std::string> unfold(const std::vector<TableEntry>& entries, int world);

}  // namespace npucache::coord
