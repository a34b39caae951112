//===- Dump.h - print an executable readably --------------------*- C++ -*-===//

#ifndef MFC_TOOLS_MF_RUN_DUMP_H
#define MFC_TOOLS_MF_RUN_DUMP_H

#include "runtime/format/Executable.h"

#include <ostream>

namespace mfrt {

/// Prints the model info, parameters, entries and their op lists.
void dumpExecutable(const Executable &executable, std::ostream &os);

} // namespace mfrt

#endif // MFC_TOOLS_MF_RUN_DUMP_H
