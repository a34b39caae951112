//===- Fail.h - mf-run's error messages and exit status ---------*- C++ -*-===//

#ifndef MFC_TOOLS_MF_RUN_FAIL_H
#define MFC_TOOLS_MF_RUN_FAIL_H

#include "runtime/base/Status.h"
#include "runtime/hal/Communicator.h"

#include <string>

namespace mfrt {

/// The ranks of a multi-rank run: errors then name the rank that hit them.
void setErrorRanks(const Communicator *ranks);

/// Prints "mf-run: error: ..." (one write: ranks share stderr) and returns
/// exit status 1.
int fail(const std::string &message);

/// The same for a runtime error, returning the exit status of its kind.
int fail(const Status &status);
/// The same for an error of kind `code`.
inline int fail(StatusCode code, const std::string &message) {
  return fail(Status::error(code, message));
}

/// The exit status of a bad command line: an unknown flag, a flag's value,
/// flags that do not go together.
inline constexpr int kUsageExit = 2;
/// Prints the message and returns kUsageExit.
int failUsage(const std::string &message);

/// The exit status of a runtime error, by its kind, as sysexits.h names
/// them: a script can tell a missing file (66) from bad or corrupt input
/// (65), a model this machine cannot run (78), exhausted memory (71), an
/// unread format feature (69), an I/O or MPI failure (74) and a bug (70);
/// 1 otherwise, 2 for a bad command line.
int exitStatusOf(StatusCode code);

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_FAIL_H
