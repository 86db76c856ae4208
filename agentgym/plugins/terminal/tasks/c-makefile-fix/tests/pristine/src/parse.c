#include <stdlib.h>

#include "calc.h"

int parse_number(const char *text, double *out) {
    char *end;
    if (text == NULL || *text == '\0') {
        return -1;
    }
    *out = strtod(text, &end);
    return *end == '\0' ? 0 : -1;
}
