# Writes a file (the chat page) as a C array of its bytes and a final 0:
# make runs it on server/chat.html to give server/chat-page.c, which the
# command links.  od and sed only, so no tool beyond POSIX is needed.
echo '/* made from server/chat.html by server/embed.sh: edit those, not this */'
echo '#include "server/server.h"'
echo 'const char hs_srv_chat_page[] = {'
od -An -v -tx1 "$1" | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'
echo '0 };'
echo 'const size_t hs_srv_chat_page_len = sizeof hs_srv_chat_page - 1;'
