#include "XTalkIndexStoreReader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The few declarations of the toolchain's indexstore.h this reader uses
// (the header is not on every toolchain's include path; the ABI is stable).
typedef struct {
    const char *data;
    size_t length;
} string_ref;
typedef void *store_t;
typedef void *error_t_;
typedef void *unit_reader_t;
typedef void *dependency_t;
typedef void *record_reader_t;
typedef void *occurrence_t;
typedef void *symbol_t;
typedef void *relation_t;

enum { DEPENDENCY_RECORD = 2 };
enum { ROLE_REL_CHILDOF = 1 << 9, ROLE_REL_OVERRIDEOF = 1 << 11, ROLE_REL_CONTAINEDBY = 1 << 16 };

typedef struct {
    const char *(*error_get_description)(error_t_);
    void (*error_dispose)(error_t_);
    store_t (*store_create)(const char *, error_t_ *);
    void (*store_dispose)(store_t);
    bool (*units_apply_f)(store_t, unsigned, void *, bool (*)(void *, string_ref));
    unit_reader_t (*unit_reader_create)(store_t, const char *, error_t_ *);
    void (*unit_reader_dispose)(unit_reader_t);
    bool (*dependencies_apply_f)(unit_reader_t, void *, bool (*)(void *, dependency_t));
    int (*dependency_get_kind)(dependency_t);
    string_ref (*dependency_get_name)(dependency_t);
    string_ref (*dependency_get_filepath)(dependency_t);
    record_reader_t (*record_reader_create)(store_t, const char *, error_t_ *);
    void (*record_reader_dispose)(record_reader_t);
    bool (*occurrences_apply_f)(record_reader_t, void *, bool (*)(void *, occurrence_t));
    symbol_t (*occurrence_get_symbol)(occurrence_t);
    bool (*relations_apply_f)(occurrence_t, void *, bool (*)(void *, relation_t));
    uint64_t (*occurrence_get_roles)(occurrence_t);
    void (*occurrence_get_line_col)(occurrence_t, unsigned *, unsigned *);
    string_ref (*symbol_get_usr)(symbol_t);
    string_ref (*symbol_get_name)(symbol_t);
    uint64_t (*relation_get_roles)(relation_t);
    symbol_t (*relation_get_symbol)(relation_t);
} api_t;

typedef struct {
    api_t api;
    store_t store;
    void *context;
    xtalk_index_record_filter filter;
    xtalk_index_occurrence_visitor visit;
    const char *file;  // the record being read
    char *error;
    size_t error_size;
    bool failed;
} reader_t;

typedef struct {
    uint64_t roles;
    char *container_usr;
    char *parent_usr;
    char *parent_name;
    char *override_usr;
} relations_t;

static char *copy(string_ref ref) {
    char *text = malloc(ref.length + 1);
    if (text == NULL) return NULL;
    if (ref.length > 0) memcpy(text, ref.data, ref.length);
    text[ref.length] = 0;
    return text;
}

static void fail(reader_t *reader, const char *what, error_t_ error) {
    reader->failed = true;
    const char *description = error != NULL ? reader->api.error_get_description(error) : "unknown error";
    snprintf(reader->error, reader->error_size, "%s: %s", what, description);
    if (error != NULL) reader->api.error_dispose(error);
}

static bool relation(void *context, relation_t relation) {
    reader_t *reader = ((void **)context)[0];
    relations_t *found = ((void **)context)[1];
    uint64_t roles = reader->api.relation_get_roles(relation);
    symbol_t symbol = reader->api.relation_get_symbol(relation);
    if ((roles & ROLE_REL_CONTAINEDBY) && found->container_usr == NULL) {
        found->container_usr = copy(reader->api.symbol_get_usr(symbol));
    }
    if ((roles & ROLE_REL_OVERRIDEOF) && found->override_usr == NULL) {
        found->override_usr = copy(reader->api.symbol_get_usr(symbol));
    }
    if ((roles & ROLE_REL_CHILDOF) && found->parent_usr == NULL) {
        found->parent_usr = copy(reader->api.symbol_get_usr(symbol));
        found->parent_name = copy(reader->api.symbol_get_name(symbol));
    }
    return true;
}

static bool occurrence(void *context, occurrence_t occurrence) {
    reader_t *reader = context;
    symbol_t symbol = reader->api.occurrence_get_symbol(occurrence);
    relations_t found = {0, NULL, NULL, NULL, NULL};
    void *pair[2] = {reader, &found};
    reader->api.relations_apply_f(occurrence, pair, relation);
    char *usr = copy(reader->api.symbol_get_usr(symbol));
    char *name = copy(reader->api.symbol_get_name(symbol));
    xtalk_index_occurrence out = {
        .file = reader->file,
        .usr = usr != NULL ? usr : "",
        .name = name != NULL ? name : "",
        .container_usr = found.container_usr != NULL ? found.container_usr : "",
        .parent_usr = found.parent_usr != NULL ? found.parent_usr : "",
        .parent_name = found.parent_name != NULL ? found.parent_name : "",
        .override_usr = found.override_usr != NULL ? found.override_usr : "",
        .roles = reader->api.occurrence_get_roles(occurrence),
    };
    reader->api.occurrence_get_line_col(occurrence, &out.line, &out.column);
    reader->visit(reader->context, &out);
    free(usr);
    free(name);
    free(found.container_usr);
    free(found.parent_usr);
    free(found.parent_name);
    free(found.override_usr);
    return true;
}

static bool dependency(void *context, dependency_t dependency) {
    reader_t *reader = context;
    if (reader->api.dependency_get_kind(dependency) != DEPENDENCY_RECORD) return true;
    char *name = copy(reader->api.dependency_get_name(dependency));
    char *file = copy(reader->api.dependency_get_filepath(dependency));
    if (name != NULL && file != NULL && reader->filter(reader->context, name, file)) {
        error_t_ error = NULL;
        record_reader_t record = reader->api.record_reader_create(reader->store, name, &error);
        if (record == NULL) {
            fail(reader, "reading a record", error);
        } else {
            reader->file = file;
            reader->api.occurrences_apply_f(record, reader, occurrence);
            reader->api.record_reader_dispose(record);
        }
    }
    free(name);
    free(file);
    return !reader->failed;
}

static bool unit(void *context, string_ref unit_name) {
    reader_t *reader = context;
    char *name = copy(unit_name);
    if (name == NULL) return false;
    error_t_ error = NULL;
    unit_reader_t unit = reader->api.unit_reader_create(reader->store, name, &error);
    free(name);
    if (unit == NULL) {
        fail(reader, "reading a unit", error);
        return false;
    }
    reader->api.dependencies_apply_f(unit, reader, dependency);
    reader->api.unit_reader_dispose(unit);
    return !reader->failed;
}

#define LOAD(field, symbol)                                                                        \
    do {                                                                                           \
        *(void **)(&reader.api.field) = dlsym(library, symbol);                                    \
        if (reader.api.field == NULL) {                                                            \
            snprintf(error, error_size, "%s has no %s", library_path, symbol);                     \
            dlclose(library);                                                                      \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

int xtalk_index_read(
    const char *library_path, const char *store_path, void *context, xtalk_index_record_filter filter,
    xtalk_index_occurrence_visitor visit, char *error, size_t error_size) {
    void *library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(error, error_size, "cannot load %s: %s", library_path, dlerror());
        return -1;
    }
    reader_t reader = {.context = context, .filter = filter, .visit = visit, .error = error, .error_size = error_size};
    LOAD(error_get_description, "indexstore_error_get_description");
    LOAD(error_dispose, "indexstore_error_dispose");
    LOAD(store_create, "indexstore_store_create");
    LOAD(store_dispose, "indexstore_store_dispose");
    LOAD(units_apply_f, "indexstore_store_units_apply_f");
    LOAD(unit_reader_create, "indexstore_unit_reader_create");
    LOAD(unit_reader_dispose, "indexstore_unit_reader_dispose");
    LOAD(dependencies_apply_f, "indexstore_unit_reader_dependencies_apply_f");
    LOAD(dependency_get_kind, "indexstore_unit_dependency_get_kind");
    LOAD(dependency_get_name, "indexstore_unit_dependency_get_name");
    LOAD(dependency_get_filepath, "indexstore_unit_dependency_get_filepath");
    LOAD(record_reader_create, "indexstore_record_reader_create");
    LOAD(record_reader_dispose, "indexstore_record_reader_dispose");
    LOAD(occurrences_apply_f, "indexstore_record_reader_occurrences_apply_f");
    LOAD(occurrence_get_symbol, "indexstore_occurrence_get_symbol");
    LOAD(relations_apply_f, "indexstore_occurrence_relations_apply_f");
    LOAD(occurrence_get_roles, "indexstore_occurrence_get_roles");
    LOAD(occurrence_get_line_col, "indexstore_occurrence_get_line_col");
    LOAD(symbol_get_usr, "indexstore_symbol_get_usr");
    LOAD(symbol_get_name, "indexstore_symbol_get_name");
    LOAD(relation_get_roles, "indexstore_symbol_relation_get_roles");
    LOAD(relation_get_symbol, "indexstore_symbol_relation_get_symbol");
    error_t_ store_error = NULL;
    reader.store = reader.api.store_create(store_path, &store_error);
    if (reader.store == NULL) {
        fail(&reader, "opening the index store", store_error);
        dlclose(library);
        return -1;
    }
    reader.api.units_apply_f(reader.store, 0, &reader, unit);
    reader.api.store_dispose(reader.store);
    dlclose(library);
    return reader.failed ? -1 : 0;
}
