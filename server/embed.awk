# Writes a text file (the chat page) as a C string: make runs it on
# server/chat.html to give server/chat-page.c, which the command links.
BEGIN {
	print "/* made from server/chat.html by server/embed.awk: edit those, not this */"
	print "#include \"server/server.h\""
	print "const char hs_srv_chat_page[] ="
}
{
	gsub(/\\/, "\\\\")
	gsub(/"/, "\\\"")
	gsub(/\?/, "\\?")
	gsub(/\t/, "\\t")
	printf "\t\"%s\\n\"\n", $0
}
END {
	print "\t;"
	print "const size_t hs_srv_chat_page_len = sizeof hs_srv_chat_page - 1;"
}
