#ifndef ENTITLEMENT_CPOSTGRES_SHIM_H
#define ENTITLEMENT_CPOSTGRES_SHIM_H
#include <libpq-fe.h>
#endif
