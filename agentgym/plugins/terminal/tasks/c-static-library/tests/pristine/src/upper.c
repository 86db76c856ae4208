#include <ctype.h>

#include "strutil.h"

char *su_upper(char *s) {
    for (char *p = s; *p; p++) {
        *p = (char)toupper((unsigned char)*p);
    }
    return s;
}
