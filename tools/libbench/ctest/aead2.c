#include <openssl/evp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  const char* names[]={"ChaCha20-Poly1305","AES-128-GCM"};
  unsigned char key[32]={1},iv[32]={0},buf[8192+64],aad[13]={0xcc};
  for(int a=0;a<2;a++) for(int vary=0;vary<2;vary++){
    EVP_CIPHER*c=EVP_CIPHER_fetch(NULL,names[a],NULL);
    EVP_CIPHER_CTX*ctx=EVP_CIPHER_CTX_new();
    EVP_CipherInit_ex(ctx,c,NULL,NULL,NULL,1);
    EVP_CIPHER_CTX_set_key_length(ctx,EVP_CIPHER_get_key_length(c));
    EVP_CipherInit_ex(ctx,NULL,NULL,key,iv,1);
    long iters=2000000; int fails=0; double best=1e18;
    for(int rep=0;rep<5;rep++){ double t0=now();
      for(long i=0;i<iters;i++){int outl; if(vary) iv[0]=i;
        fails+= !EVP_EncryptInit_ex(ctx,NULL,NULL,NULL,iv);
        fails+= !EVP_EncryptUpdate(ctx,NULL,&outl,aad,13);
        fails+= !EVP_EncryptUpdate(ctx,buf,&outl,buf,16);
        fails+= !EVP_EncryptFinal_ex(ctx,buf+outl,&outl);}
      double e=(now()-t0)/iters; if(e<best)best=e;}
    printf("%s vary_iv=%d: %.1f ns/msg (16B), failures=%d\n",names[a],vary,best,fails);
  }
}
