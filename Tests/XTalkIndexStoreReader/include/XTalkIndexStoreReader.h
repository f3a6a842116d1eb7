// Reads the compiler's index store (the one `swift build` writes in debug
// builds, under .build/<configuration>/index/store) through the toolchain's
// libIndexStore, loaded at run time: the documentation tests use it to know
// exactly which public symbols each test refers to.

#ifndef XTALK_INDEX_STORE_READER_H
#define XTALK_INDEX_STORE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// One occurrence of a symbol in a source file. Strings are valid only during the callback.
typedef struct {
    const char *file;
    const char *usr;
    const char *name;
    /// The symbol whose body holds this occurrence (`containedBy`), or "".
    const char *container_usr;
    /// The symbol this one is a member of (`childOf`, for declarations), or "".
    const char *parent_usr;
    const char *parent_name;
    /// The symbol this declaration implements (`overrideOf`: a protocol requirement, a superclass member), or "".
    const char *override_usr;
    uint64_t roles;
    unsigned line;
    unsigned column;
} xtalk_index_occurrence;

/// Whether to read a record (one per source file and content); called once per unit that lists it.
typedef bool (*xtalk_index_record_filter)(void *context, const char *record_name, const char *file);
typedef void (*xtalk_index_occurrence_visitor)(void *context, const xtalk_index_occurrence *occurrence);

/// Reads every record of the store at `store_path` that `filter` accepts.
/// Returns 0, or -1 with a description in `error`.
int xtalk_index_read(
    const char *library_path, const char *store_path, void *context, xtalk_index_record_filter filter,
    xtalk_index_occurrence_visitor visit, char *error, size_t error_size);

#endif
