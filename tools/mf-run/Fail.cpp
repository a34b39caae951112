//===- Fail.cpp - mf-run's error messages and exit status -----------------===//

#include "tools/mf-run/Fail.h"

#include <sysexits.h>

#include <cstdio>

using namespace mfrt;

namespace {
const Communicator *errorRanks = nullptr;
} // namespace

void mfrt::setErrorRanks(const Communicator *ranks) { errorRanks = ranks; }

int mfrt::fail(const std::string &message) {
  std::string line = "mf-run: error: " +
                     (errorRanks && errorRanks->size() > 1
                          ? "rank " + std::to_string(errorRanks->rank()) + ": "
                          : std::string()) +
                     message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return 1;
}

int mfrt::failUsage(const std::string &message) {
  fail(message);
  return kUsageExit;
}

int mfrt::fail(const Status &status) {
  fail(status.message());
  return exitStatusOf(status.code());
}

int mfrt::exitStatusOf(StatusCode code) {
  switch (code) {
  case StatusCode::InvalidArgument:
  case StatusCode::DataLoss:
    return EX_DATAERR;
  case StatusCode::NotFound:
    return EX_NOINPUT;
  case StatusCode::FailedPrecondition:
    return EX_CONFIG;
  case StatusCode::ResourceExhausted:
    return EX_OSERR;
  case StatusCode::Unimplemented:
    return EX_UNAVAILABLE;
  case StatusCode::Unavailable:
    return EX_IOERR;
  case StatusCode::Internal:
    return EX_SOFTWARE;
  case StatusCode::Ok:
  case StatusCode::Unknown:
    break;
  }
  return 1;
}
