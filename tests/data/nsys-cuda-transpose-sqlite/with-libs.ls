total 108
drwxr-xr-x  2 root root  4096 Nov 30 21:26 .
drwxrwxrwt 10 root root 16384 Nov 30 21:26 ..
-rw-rw-r--  1 root root 86419 Nov 30 21:26 tp.nsys-rep
