// Isolate OpenSSL 3.0 per-message AEAD costs: which step makes the Rust `openssl` crate
// sequence slower than `openssl speed -aead`?
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  const char* names[]={"ChaCha20-Poly1305","AES-128-GCM"};
  unsigned char key[32]={1},iv[12]={2},buf[8192+32],tag[16],aad[13]={0xcc};
  int sizes[]={16,1024,8192};
  for(int a=0;a<2;a++){
    EVP_CIPHER*c=EVP_CIPHER_fetch(NULL,names[a],NULL);
    for(int si=0;si<3;si++){int n=sizes[si];
      for(int variant=0;variant<5;variant++){
        EVP_CIPHER_CTX*ctx=EVP_CIPHER_CTX_new();
        EVP_EncryptInit_ex(ctx,c,NULL,key,NULL);
        long iters=2000000/ (n/16>50?n/16:1) ; if(iters<20000)iters=20000;
        double best=1e18;
        for(int rep=0;rep<7;rep++){
          double t0=now();
          for(long i=0;i<iters;i++){int outl; iv[0]=i;
            EVP_EncryptInit_ex(ctx,NULL,NULL,NULL,iv);
            if(variant==1||variant==3) EVP_EncryptUpdate(ctx,NULL,&outl,aad,13);
            if(variant==4) (void)EVP_CIPHER_CTX_get_iv_length(ctx);
            EVP_EncryptUpdate(ctx,buf,&outl,buf,n);
            EVP_EncryptFinal_ex(ctx,buf+outl,&outl);
            if(variant>=2) EVP_CIPHER_CTX_ctrl(ctx,EVP_CTRL_AEAD_GET_TAG,16,tag);
          }
          double e=(now()-t0)/iters; if(e<best)best=e;
        }
        const char*vn[]={"init+upd+final","init+aad13+upd+final (speed -aead)","init+upd+final+gettag","init+aad13+upd+final+gettag","init+get_iv_length+upd+final"};
        printf("%-18s %5d  %-40s %8.1f ns  %8.0f MB/s\n",names[a],n,vn[variant],best,n*1000.0/best);
        EVP_CIPHER_CTX_free(ctx);
      }
    }
  }
}
